"""Check every EXL3_* environment name in frank's profiles against a downloaded exllamav3 wheel's source.

    make exl3-wheel     (pip download --no-deps exllamav3==1.6.5 -d .device/exl3)
    .venv/bin/python scripts/check_exl3_names.py .device/exl3/exllamav3-1.6.5-py3-none-any.whl [--profile P ...]

A name counts as read by exllamav3 when it appears as a string literal ("EXL3_..." or 'EXL3_...') in one of
the wheel's Python files or in the C++/CUDA sources it ships and compiles on first import (the CPU-expert
pool reads EXL3_MOE_CPU_PIN there, with getenv). Names that belong to other software (ALLOWED_ELSEWHERE, with
the reason) are reported but do not fail. Exit 0 when every other name is found, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frank.engine.profiles import Profile, list_profiles, load_profile  # noqa: E402

NAME = re.compile(r"EXL3_[A-Z0-9_]+")
# Variables in the profiles that exllamav3 does not read, on purpose.
ALLOWED_ELSEWHERE = {
    "EXL3_CPU_EXPERTS_SCHED": "diffbot's own CPU-expert runtime (the seed's schedule variable), not exllamav3",
}


def profile_names(profile: Profile) -> dict[str, str]:
    """EXL3_* names a profile sets -> where (env, or the knob that sets it)."""
    found = {k: "env" for k in profile.env if NAME.fullmatch(k)}
    for name, knob in profile.knobs.items():
        for target in (knob.target, knob.env, *(var for names in knob.with_env.values() for var in names)):
            if NAME.fullmatch(target):
                found[target] = f"knobs.{name}"
    return found


SOURCES = (".py", ".cpp", ".cu", ".h", ".cuh")


def wheel_names(wheel: Path) -> dict[str, list[str]]:
    """EXL3_* string literals in the wheel's Python and C++/CUDA sources -> the files that hold them."""
    literal = re.compile(r"""["'](EXL3_[A-Z0-9_]+)["']""")
    names: dict[str, list[str]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for member in zf.namelist():
            if member.endswith(SOURCES):
                for name in set(literal.findall(zf.read(member).decode("utf-8", "replace"))):
                    names.setdefault(name, []).append(member)
    return names


def check(wheel: Path, profiles: list[Profile]) -> tuple[list[str], bool]:
    known = wheel_names(wheel)
    lines: list[str] = []
    ok = True
    for prof in profiles:
        for name, where in sorted(profile_names(prof).items()):
            if name in known:
                lines.append(f"ok       {prof.name}: {name} ({where}) read in {', '.join(sorted(known[name])[:3])}")
            elif name in ALLOWED_ELSEWHERE:
                lines.append(f"elsewhere {prof.name}: {name} ({where}): {ALLOWED_ELSEWHERE[name]}")
            else:
                lines.append(f"UNKNOWN  {prof.name}: {name} ({where}) is not read anywhere in {wheel.name}")
                ok = False
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wheel", type=Path, help="an exllamav3 wheel (pip download --no-deps exllamav3==X)")
    parser.add_argument("--profile", action="append", help="check only these profiles (default: all)")
    args = parser.parse_args(argv)
    if not zipfile.is_zipfile(args.wheel):
        print(f"{args.wheel}: not a wheel (zip) file", file=sys.stderr)
        return 2
    profiles = (
        [load_profile(p) for p in args.profile]
        if args.profile
        else [p for p in list_profiles() if isinstance(p, Profile)]
    )
    lines, ok = check(args.wheel, profiles)
    print("\n".join(lines) or "no EXL3_* names in the profiles")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
