"""Registered experiments: frozen designs, randomized engine starts, an append-only journal, exact tests.

- design.py     the TOML design file, its validation (errors name the field) and its canonical form + SHA-256
- randomize.py  drawing the order of engine starts uniformly from all orders, from a recorded seed
- registry.py   registration: the frozen run folder (design copy, hashes, seed, order) and loading it back
- journal.py    the append-only JSON-lines journal (fsynced per event, tolerant of a torn last line)
- exact.py      the exact sign test and permutation test, and the smallest p a design can reach
- runner.py     executing cells in the frozen order, resuming after a kill; the live state for the console
- report.py     effect per block, p-value, decision under the frozen rule, revert rule, guards; CSV analysis
"""
