"""A near miss: the visible tests pass, but a window longer than the values gives one sum, not none."""

# expect: hidden cases failing
from pathlib import Path

core = Path("ledger/core.py")
core.write_text(core.read_text().replace("range(len(values) - window)]", "range(max(1, len(values) - window + 1))]"))
