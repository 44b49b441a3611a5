"""Workstation telemetry: one sampler thread (sampler.py) reading the CPU pool and RAM (cpu.py over procfs.py),
the GPUs (gpu.py, NVML) and the engine's /metrics (frank.engine.metrics) into immutable Snapshots; export.py
serves them in Prometheus format."""
