"""Headless workloads and replays: the workload format, the synthetic W01, the replay runner, the recorder
and (in `replays.experiments`) registered experiments. Never imports textual or console."""
