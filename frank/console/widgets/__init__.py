"""Dashboard, replay and log widgets. They only render values they are given; they never fetch."""
