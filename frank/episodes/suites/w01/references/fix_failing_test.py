"""Reference: the window loop stops one short; fix its bound."""

from pathlib import Path

core = Path("ledger/core.py")
core.write_text(core.read_text().replace("range(len(values) - window)]", "range(len(values) - window + 1)]"))
