"""The text of a GPU machine's script as it runs: the script, then each file it sources from the checkout
(`. "$TREE/scripts/NAME.sh"`), so a test of its commands and files reads the shared functions too."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def script_text(path: Path) -> str:
    text = path.read_text()
    sourced = re.findall(r'^\. "\$TREE/(scripts/[\w.-]+\.sh)"', text, re.M)
    return "\n".join([text] + [(REPO / name).read_text() for name in sourced])
