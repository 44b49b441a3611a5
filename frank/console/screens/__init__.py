"""The console's screens: Dashboard, Replays, Experiments, Logs, Campaign and Episodes (app MODES), help and
confirm."""
