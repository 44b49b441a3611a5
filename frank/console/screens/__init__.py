"""The console's screens: Dashboard, Replays, Experiments and Logs (app MODES), help and confirm."""
