"""Workstation telemetry: one sampler thread (sampler.py) reading the CPU pool and RAM (cpu.py over procfs.py),
the GPUs (gpu.py, NVML), the engine's /metrics (frank.engine.metrics) and the CPU-side decode figures
(cpu_decode.py: exllamav3's profile lines, followed in the engine log) into immutable Snapshots; export.py
serves them in Prometheus format."""
