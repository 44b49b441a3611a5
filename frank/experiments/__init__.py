"""Registered experiments: frozen designs, randomized engine starts, an append-only journal, exact tests.

- design.py, tables.py  the TOML design file, its validation (errors name the field), canonical form + SHA-256
- workloads.py  the workload a design names, found and hashed
- randomize.py  drawing the order of engine starts uniformly from all orders, from a recorded seed
- registry.py   registration: the frozen run folder (design copy, hashes, seed, order) and loading it back
- journal.py    the append-only JSON-lines journal (fsynced per event, tolerant of a torn last line)
- runner.py     executing cells in the frozen order, resuming after a kill; the live state for the console
- cell.py       one cell on the real engine: start with the arm's knobs, replay (or episodes), stop, measure
- job.py        the `experiment` job kind (a detached runner)
- tally.py      the block tally, one for the live board and the decision (a voided block counts in neither)
- exact.py      the exact sign test and permutation test, and the smallest p a design can reach
- report.py     effect per block, p-value, decision under the frozen rule, revert rule, guards; CSV analysis
- fidelity.py   the fidelity rule of a design; html.py the report as one HTML page; plan.py power from noise
"""
