"""What this host is running for an experiment (run, arm, campaign part), in one private file of its state
dir: written by a placed cell when it begins, removed when it ends. The exporter puts these on every series
as labels (with the engine's profile), so a fleet's Prometheus knows which arm each host's figures belong to.
"""

from __future__ import annotations

import json
from typing import Any

from frank import paths, readfile
from frank.errors import FrankError

FILE = "activity.json"
LABELS = ("profile", "experiment", "arm", "part")  # every exported series carries these (empty: none)


def write_activity(**fields: Any) -> None:
    paths.write_private(paths.state_dir() / FILE, json.dumps(fields, sort_keys=True, default=str))


def read_activity() -> dict[str, Any]:
    """The activity file's fields; {} when nothing runs (or the file is unreadable: a torn write)."""
    try:
        return readfile.read_object(paths.state_dir(create=False) / FILE)
    except FrankError:
        return {}


def clear_activity() -> None:
    (paths.state_dir(create=False) / FILE).unlink(missing_ok=True)


def activity_labels(profile: str | None) -> dict[str, str]:
    """The exporter's labels: the engine's profile, and the experiment, arm and part being run."""
    act = read_activity()
    values = {"profile": profile or "", **{k: str(act.get(k) or "") for k in LABELS[1:]}}
    return {k: values[k] for k in LABELS}
