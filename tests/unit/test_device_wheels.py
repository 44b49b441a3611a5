"""The GPU machine's wheel list cannot miss a dependency again (a GPU run once stopped at `No module named
'pydantic'`): every distribution `frank` needs at run time is carried (scripts/device-wheels.txt, at the
console lock's version: `make lock` derives the list from locks/console.txt) or in the GPU image
(scripts/gpu-image-packages.txt); and every module the CLI loads imports from exactly those, put into an
empty target, with no site-packages."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from scripts.locks import FROM_THE_IMAGE, device_wheels, norm, pins, runtime_closure

REPO = Path(__file__).resolve().parents[2]
# Imported only inside the engine's, exllamav3's, the agent's or the fleet's own environment, never by the CLI;
# and the `web` extra's (aiohttp, textual-serve: `frank serve`, which the GPU scripts never run).
OTHER_VENVS = {
    *("vllm", "torch", "transformers", "tokenizers", "gguf", "xllamacpp", "exllamav3"),
    *("inspect_ai", "openai", "ray"),
}
NOT_CARRIED_EXTRAS = {"aiohttp", "textual_serve"}


def listed(name: str) -> dict[str, str]:
    out = {}
    for line in (REPO / "scripts" / name).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            dist, _, version = line.partition("==")
            out[norm(dist)] = version
    return out


def test_the_device_list_is_derived_from_the_console_lock() -> None:
    """A file against a file: every carried wheel at locks/console.txt's version (never at whatever the registry
    served the day a venv was made), and the list exactly what `make lock` derives from that lock."""
    carried, image = listed("device-wheels.txt"), set(listed("gpu-image-packages.txt"))
    locked = pins((REPO / "locks" / "console.txt").read_text())
    drifted = {name: (version, locked.get(name)) for name, version in carried.items() if locked.get(name) != version}
    assert not drifted, f"carried version != the console lock's (listed, locked); run make lock: {drifted}"
    assert set(FROM_THE_IMAGE) <= image, "a package taken from the GPU image is not on its list"
    closure = runtime_closure()
    missing = sorted(name for name in closure if name not in carried and name not in FROM_THE_IMAGE)
    assert not missing, f"needed by frank at run time, neither in scripts/device-wheels.txt nor on the image: {missing}"
    unused = sorted(set(carried) - set(closure))
    assert not unused, f"carried but needed by nothing: {unused}"
    assert (REPO / "scripts" / "device-wheels.txt").read_text() == device_wheels(), "run make lock"


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
