"""The venvs' lock files (locks/*.txt): what each is compiled from, the check `make lint` runs, the diff
`make lock` prints, and the GPU machine's wheel list (scripts/device-wheels.txt) derived from the console's.

    python scripts/locks.py compile UV [--keep]   every lock compiled again by uv, with hashes (make lock);
                                                  --keep keeps each pin its inputs still allow
    python scripts/locks.py check                 each lock pins every input inside its range (make lint):
                                                  exit 1 naming the package
    python scripts/locks.py diff [REV]            the versions the locks changed since REV (default HEAD)
    python scripts/locks.py device-wheels         scripts/device-wheels.txt written from the console's lock
                                                  (run in the console venv, installed from that lock)

A lock is what `make setup` installs, exactly (`uv pip sync --require-hashes`): nothing is resolved at
set-up time, so a release on the registry changes nothing until `make lock` takes it on purpose.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Every lock is for the Python and platform the Makefile's venvs use (CPython 3.11, x86-64 Linux).
PYTHON = "3.11"
PLATFORM = "x86_64-manylinux_2_28"
MARKER_ENV = {
    "python_version": PYTHON,
    "python_full_version": f"{PYTHON}.0",  # uv takes --python-version 3.11 as 3.11.0
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
# The console venv's extras (make setup installs them all).
CONSOLE_EXTRAS = ("test", "report", "web", "fleet")
# The registry serves these as CUDA builds that break `import transformers` beside torch's CPU build
# (locks/engine.in says more): the engine's lock leaves them out.
ENGINE_LEFT_OUT = ("torchvision", "torchaudio", "torchcodec")
# torch's CPU build (the engine lock pins torch==2.13.0+cpu) lies here on this kind of machine; elsewhere
# TORCH_WHEELS=https://download.pytorch.org/whl/cpu/torch/ finds the same file.
TORCH_WHEELS = os.environ.get("TORCH_WHEELS", "/opt/wheels")


@dataclass(frozen=True)
class Lock:
    name: str
    inputs: tuple[str, ...]  # pyproject.toml (its dependencies, the extras below) or a locks/*.in file
    extras: tuple[str, ...] = ()
    options: tuple[str, ...] = ()  # uv pip compile's own, beyond the common ones

    @property
    def path(self) -> str:
        return f"locks/{self.name}.txt"


LOCKS = (
    Lock("console", ("pyproject.toml", "locks/console.in"), extras=CONSOLE_EXTRAS),
    Lock(
        "engine",
        ("locks/engine.in",),
        options=("--find-links", TORCH_WHEELS, *(a for n in ENGINE_LEFT_OUT for a in ("--no-emit-package", n))),
    ),
    Lock("agent", ("locks/agent.in",)),
    Lock("llamacpp", ("locks/llamacpp.in",)),
    # setuptools, which builds frank itself; its check also reads pyproject.toml's [build-system]
    Lock("build", ("locks/build.in",)),
    Lock("uv", ("locks/uv.in",)),
)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """A lock's `name==version` lines -> {normalized name: version}."""
    return {norm(m.group(1)): m.group(2) for line in text.splitlines() if (m := PIN.match(line))}


def unhashed(text: str) -> list[str]:
    """The pinned names in a lock with no --hash after them (a lock without hashes cannot be installed
    with --require-hashes)."""
    out, current, hashed = [], None, True
    for line in text.splitlines() + ["end==0"]:
        if m := PIN.match(line):
            if current and not hashed:
                out.append(current)
            current, hashed = norm(m.group(1)), False
        elif "--hash=" in line:
            hashed = True
    return out


def requirements(lock: Lock, repo: Path = REPO) -> list[tuple[str, str]]:
    """(where it is written, the requirement line) for every input of a lock that applies on its platform."""
    from packaging.requirements import Requirement

    out: list[tuple[str, str]] = []
    for source in lock.inputs:
        text = (repo / source).read_text()
        if source.endswith(".toml"):
            project = tomllib.loads(text)["project"]
            lines = list(project.get("dependencies", []))
            for extra in lock.extras:
                lines += project.get("optional-dependencies", {}).get(extra, [])
        else:
            lines = [ln.split("#")[0].strip() for ln in text.splitlines()]
        out += [(source, ln) for ln in lines if ln]
    if lock.name == "build":
        build_system = tomllib.loads((repo / "pyproject.toml").read_text())["build-system"]
        out += [("pyproject.toml", r) for r in build_system["requires"]]

    def applies(line: str) -> bool:
        marker = Requirement(line).marker
        return marker is None or marker.evaluate(MARKER_ENV)

    return [(source, line) for source, line in out if applies(line)]


def check(repo: Path = REPO) -> list[str]:
    """Every problem of every lock against its inputs: a package its inputs require that it does not pin,
    or pins outside the input's range (older than a floor, or a version the range excludes); a pin with no
    hash; the engine's left-out packages pinned."""
    from packaging.requirements import Requirement

    problems: list[str] = []
    for lock in LOCKS:
        path = repo / lock.path
        if not path.exists():
            problems.append(f"{lock.path}: missing (make lock)")
            continue
        text = path.read_text()
        pinned = pins(text)
        for source, line in requirements(lock, repo):
            req = Requirement(line)
            version = pinned.get(norm(req.name))
            if version is None:
                problems.append(f"{lock.path}: {req.name} is not pinned, {source} requires {line!r} (make lock)")
            elif not req.specifier.contains(version, prereleases=True):
                problems.append(
                    f"{lock.path}: {req.name}=={version} is outside {source}'s {line!r} (make lock, or mend the range)"
                )
        problems += [f"{lock.path}: {name} has no --hash (make lock)" for name in unhashed(text)]
        if lock.name == "engine":
            left_in = [name for name in ENGINE_LEFT_OUT if name in pinned]
            problems += [f"{lock.path}: {name} is pinned, but the engine venv must not have it" for name in left_in]
    return problems


def compile_locks(uv: str, keep: bool, repo: Path = REPO) -> None:
    """Each lock compiled into a scratch copy (uv prefers the pins it finds there), and put in place only if
    its text changed, so an unchanged lock keeps its time and make reinstalls nothing."""
    for lock in LOCKS:
        path, scratch = repo / lock.path, repo / f"{lock.path}.new"
        if path.exists():
            scratch.write_text(path.read_text())
        argv = [uv, "pip", "compile", "-q", *lock.inputs, *(a for e in lock.extras for a in ("--extra", e))]
        argv += ["--generate-hashes", "--python-version", PYTHON, "--python-platform", PLATFORM]
        argv += ["--custom-compile-command", "make lock", *lock.options, "-o", str(scratch.relative_to(repo))]
        if not keep:
            argv.append("--upgrade")
        try:
            subprocess.run(argv, cwd=repo, check=True)
            if not path.exists() or scratch.read_text() != path.read_text():
                scratch.replace(path)
        finally:
            scratch.unlink(missing_ok=True)


def diff(rev: str = "HEAD", repo: Path = REPO) -> list[str]:
    """`lock: name old -> new` (+ added, - removed) for every version a lock changed since `rev`."""
    out = []
    for lock in LOCKS:
        shown = subprocess.run(["git", "show", f"{rev}:{lock.path}"], cwd=repo, capture_output=True, text=True)
        old = pins(shown.stdout) if shown.returncode == 0 else {}
        new = pins((repo / lock.path).read_text())
        if not old:
            out.append(f"{lock.name}: a new lock, {len(new)} pins")
            continue
        for name in sorted(old.keys() | new.keys()):
            if old.get(name) != new.get(name):
                if name not in new:
                    out.append(f"{lock.name}: - {name} {old[name]}")
                elif name not in old:
                    out.append(f"{lock.name}: + {name} {new[name]}")
                else:
                    out.append(f"{lock.name}: {name} {old[name]} -> {new[name]}")
    return out


# The GPU machine's wheel list. What the GPU scripts run: the console's dependencies and the HTML reports'.
DEVICE_EXTRAS = ("report",)
# The compiled ones the GPU image's own builds serve (scripts/gpu-image-packages.txt lists them): never
# carried, their own dependencies the image's. Everything else frank needs at run time is carried, at the
# console lock's version.
FROM_THE_IMAGE = ("numpy", "scipy", "matplotlib")
DEVICE_HEADER = """\
# The console's wheels for the offline GPU machine (scripts/device_wheels.sh downloads exactly these; the
# machine reaches no package index). Written by `make lock` (scripts/locks.py device-wheels), never by hand:
# every distribution `frank` needs at run time (pyproject.toml's dependencies and the report extra's, and
# theirs), at the console lock's version (locks/console.txt), except what the GPU image's own builds serve
# (numpy, scipy, matplotlib: scripts/gpu-image-packages.txt). tests/unit/test_device_wheels.py checks the
# file against the lock, and imports every module the CLI loads from exactly these plus the image's packages.
"""


def runtime_closure(repo: Path = REPO) -> dict[str, md.Distribution]:
    """Every distribution frank's dependencies (and DEVICE_EXTRAS') pull in, as installed in the running
    venv (the console's, installed from its lock), without walking into FROM_THE_IMAGE's own dependencies.
    {normalized name: its distribution}"""
    from packaging.requirements import Requirement

    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    roots += [Requirement(r) for extra in DEVICE_EXTRAS for r in project["optional-dependencies"][extra]]
    seen: dict[str, md.Distribution] = {}
    visited: set[tuple[str, frozenset[str]]] = set()

    def walk(req: Requirement) -> None:
        key = norm(req.name)
        if (key, frozenset(req.extras)) in visited:
            return
        visited.add((key, frozenset(req.extras)))
        seen[key] = dist = md.distribution(req.name)
        if key in FROM_THE_IMAGE:
            return
        wanted = [{"extra": e} for e in req.extras] + [{"extra": ""}]
        for raw in dist.requires or []:
            sub = Requirement(raw)
            if not sub.marker or any(sub.marker.evaluate(env) for env in wanted):
                walk(sub)

    for root in roots:
        walk(root)
    return seen


def device_wheels(repo: Path = REPO) -> str:
    """scripts/device-wheels.txt's text: the runtime closure less FROM_THE_IMAGE, at the console lock's versions."""
    locked = pins((repo / "locks" / "console.txt").read_text())
    carried = sorted(set(runtime_closure(repo)) - set(FROM_THE_IMAGE))
    return DEVICE_HEADER + "".join(f"{name}=={locked[name]}\n" for name in carried)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    comp = sub.add_parser("compile")
    comp.add_argument("uv")
    comp.add_argument("--keep", action="store_true")
    sub.add_parser("check")
    dif = sub.add_parser("diff")
    dif.add_argument("rev", nargs="?", default="HEAD")
    sub.add_parser("device-wheels")
    args = parser.parse_args(argv)
    if args.cmd == "compile":
        compile_locks(args.uv, args.keep)
    elif args.cmd == "check":
        problems = check()
        print("\n".join(problems) if problems else f"locks: {len(LOCKS)} locks inside their inputs' ranges")
        return 1 if problems else 0
    elif args.cmd == "diff":
        changed = diff(args.rev)
        print("\n".join(changed) if changed else f"locks: no version changed since {args.rev}")
    else:
        target, text = REPO / "scripts" / "device-wheels.txt", device_wheels()
        if target.read_text() != text:
            target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
