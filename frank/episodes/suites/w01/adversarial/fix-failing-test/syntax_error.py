"""Junk: a syntax error in the package."""

# expect: tests fail
from pathlib import Path

Path("ledger/core.py").write_text("def moving_sum(values, window:\n    return [\n")
