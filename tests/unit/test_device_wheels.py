"""The GPU machine's wheel list cannot miss a dependency again (a GPU run once stopped at `No module named
'pydantic'`): every distribution `frank` needs at run time is carried (scripts/device-wheels.txt, at the
console venv's version) or in the GPU image (scripts/gpu-image-packages.txt); and every module the CLI
loads imports from exactly those, put into an empty target, with no site-packages."""

from __future__ import annotations

import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# What the GPU scripts run: the console's dependencies and the HTML reports' (matplotlib, on the image).
EXTRAS = ("report",)
# Imported only inside the engine's, exllamav3's, the agent's or the fleet's own environment, never by the CLI;
# and the `web` extra's (aiohttp, textual-serve: `frank serve`, which the GPU scripts never run).
OTHER_VENVS = {
    *("vllm", "torch", "transformers", "tokenizers", "gguf", "xllamacpp", "exllamav3"),
    *("inspect_ai", "openai", "ray"),
}
NOT_CARRIED_EXTRAS = {"aiohttp", "textual_serve"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(name: str) -> dict[str, str]:
    out = {}
    for line in (REPO / "scripts" / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            dist, _, version = line.partition("==")
            out[norm(dist)] = version
    return out


def runtime_closure() -> dict[str, md.Distribution]:
    """Every distribution frank's dependencies (and the EXTRAS') pull in, as installed in this venv; an image
    package's own dependencies are the image's (it works as installed there), unless it is carried."""
    image = set(listed("gpu-image-packages.txt")) - set(listed("device-wheels.txt"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    roots += [Requirement(r) for extra in EXTRAS for r in project["optional-dependencies"][extra]]
    seen: dict[str, md.Distribution] = {}
    visited: set[tuple[str, frozenset[str]]] = set()

    def walk(req: Requirement) -> None:
        key = norm(req.name)
        if (key, frozenset(req.extras)) in visited:
            return
        visited.add((key, frozenset(req.extras)))
        seen[key] = dist = md.distribution(req.name)
        if key in image:
            return
        wanted = [{"extra": e} for e in req.extras] + [{"extra": ""}]
        for raw in dist.requires or []:
            sub = Requirement(raw)
            if not sub.marker or any(sub.marker.evaluate(env) for env in wanted):
                walk(sub)

    for root in roots:
        walk(root)
    return seen


def test_every_runtime_dependency_is_carried_at_the_venvs_version_or_on_the_image() -> None:
    carried, image = listed("device-wheels.txt"), set(listed("gpu-image-packages.txt"))
    closure = runtime_closure()
    missing = sorted(name for name in closure if name not in carried and name not in image)
    assert not missing, f"needed by frank at run time, neither in scripts/device-wheels.txt nor on the image: {missing}"
    drifted = {
        name: (carried[name], closure[name].version)
        for name in carried
        if name in closure and carried[name] != closure[name].version
    }
    assert not drifted, f"carried version != the console venv's (listed, installed): {drifted}"
    unused = sorted(set(carried) - set(closure))
    assert not unused, f"carried but needed by nothing: {unused}"


def test_the_cli_imports_from_exactly_the_carried_wheels_and_the_images_packages(tmp_path: Path) -> None:
    """The carried distributions and the image's (stand-ins: the same distributions from this venv) copied
    into an empty target; every frank module the CLI can load imported there with site-packages off."""
    target = tmp_path / "site"
    target.mkdir()
    closure = runtime_closure()
    for dist in closure.values():
        for file in dist.files or ():
            src = Path(dist.locate_file(file))
            if src.is_file() and ".." not in file.parts:
                dest = target / file
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    probe = f"""
import importlib, pkgutil, sys
sys.path[:0] = [{str(target)!r}, {str(REPO)!r}]
import frank
assert frank.__file__.startswith({str(REPO)!r}), frank.__file__
skip = {sorted(OTHER_VENVS | NOT_CARRIED_EXTRAS)!r}
failed = []
for mod in pkgutil.walk_packages(frank.__path__, "frank."):
    if mod.name.startswith("frank.plugins") or mod.name.endswith("__main__"):  # vLLM's processes; runs
        continue
    try:
        importlib.import_module(mod.name)
    except ImportError as exc:
        top = (exc.name or "").split(".")[0]
        if top not in skip:
            failed.append(f"{{mod.name}}: {{exc}}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"modules that do not import from the carried set:\n{done.stdout}{done.stderr}"
