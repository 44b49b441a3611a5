"""Where frank keeps its files.

`FRANK_HOME` overrides every path (tests use it). Without it, platformdirs gives the user's config, state
and data dirs. `FRANK_MODELS` overrides only the models dir, so a test tier can share one built model.
Directories that hold tokens, pids or results are created private to the user (0700).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from frank import readfile
from frank.errors import FrankError, WriteError

APP = "frank"
REPO_ROOT = Path(__file__).resolve().parent.parent


def _home() -> Path | None:
    home = os.environ.get("FRANK_HOME")
    return Path(home).expanduser() if home else None


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) and make the leaf readable by the user only."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def config_dir() -> Path:
    home = _home()
    return home / "config" if home else Path(platformdirs.user_config_dir(APP))


def state_dir(create: bool = True) -> Path:
    """The engine's state files; `create=False` for a reader (a status creates nothing)."""
    home = _home()
    path = home / "state" if home else Path(platformdirs.user_state_dir(APP))
    return private_dir(path) if create else path


def data_dir(create: bool = True) -> Path:
    """Runs, models, workloads; `create=False` for a reader (a check creates nothing)."""
    home = _home()
    path = home / "data" if home else Path(platformdirs.user_data_dir(APP))
    return private_dir(path) if create else path


def models_dir() -> Path:
    override = os.environ.get("FRANK_MODELS")
    path = Path(override).expanduser() if override else data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(create: bool = True) -> Path:
    """Replay runs and registered experiments."""
    path = data_dir(create) / "runs"
    return private_dir(path) if create else path


def workloads_dir() -> Path:
    """The user's own workloads (recordings, imports, generated W01)."""
    path = data_dir() / "workloads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def user_profiles_dir() -> Path:
    return config_dir() / "profiles"


def engine_venv_python() -> Path:
    """The engine venv that `make setup` builds next to the checkout; FRANK_ENGINE_PYTHON overrides it."""
    override = os.environ.get("FRANK_ENGINE_PYTHON")
    return Path(override) if override else REPO_ROOT / ".venv-engine" / "bin" / "python"


def llamacpp_venv_python() -> Path:
    """The llama.cpp venv (xllamacpp) that `make setup` builds; FRANK_LLAMACPP_PYTHON overrides it."""
    override = os.environ.get("FRANK_LLAMACPP_PYTHON")
    return Path(override) if override else REPO_ROOT / ".venv-llamacpp" / "bin" / "python"


def write_private(path: Path, text: str) -> None:
    """Write a file readable by the user only, atomically (write to a temp file, then rename).
    The file is the old one or the new one, never a part: on a full disk the temp file goes and the error
    names the file."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(f"{path}: cannot write: {exc.strerror or exc} (the file as it was is kept)") from None


def write_new(path: Path, text: str) -> None:
    """Write a file (as write_private) only where there is none, or where one holds this very text: a file
    that is there (a design the user edited, a record kept) is never overwritten; the error names it."""
    data = text.encode()
    if os.path.lexists(path):
        try:
            same = readfile.read_bytes(path, readfile.Kind("the file", len(data))) == data
        except FrankError:
            same = False
        if not same:
            raise WriteError(f"{path}: already exists and is not overwritten: remove it, or name another file")
    write_private(path, text)
