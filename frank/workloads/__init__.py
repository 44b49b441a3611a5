"""Workloads: the format (format.py), the one catalog (catalog.py), the synthetic W01 (w01.py), the
recorder (recorder.py) and the replay runner with its job kind (replay.py, replay_job.py)."""
