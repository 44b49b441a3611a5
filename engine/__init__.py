"""Headless engine layer: profiles, the process controller, telemetry, the tiny model and the region cache.

Nothing in this package imports textual or console (tests/unit/test_layering.py enforces it).
"""
