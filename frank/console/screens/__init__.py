"""The console's screens: Dashboard, Replays, Experiments, Logs, Campaign and Episodes (app MODES), and the
dialogs (help, confirm, knobs, episodes launch). They render frank.console.state and import neither the app
nor the actions (frank.console.host is what they may ask of the app)."""
