"""Imported at start-up by every Python process of an engine started with this folder on PYTHONPATH (by
benchmarks/front_end_phases.py only). With FRANK_FRONT_END_PHASES naming a folder, each process logs the
time at the phase boundaries of a request there (phase_probe.py); without it, this does nothing."""

import os

if os.environ.get("FRANK_FRONT_END_PHASES"):
    import phase_probe

    phase_probe.arm()
