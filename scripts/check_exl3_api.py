"""frank's generator layer over exllamav3 (frank/engine/exl3/exl3_generator.py) against exllamav3's own wheel.

That layer needs CUDA, so it runs only on the GPU machine. This checks its seam to the wheel here, read as
source (the wheel imports torch and compiles its extension on import), as check_exl3_names.py checks the
profiles' EXL3_* variables:
- every name it imports from exllamav3 exists;
- every exllamav3 function it calls is where it says;
- every keyword it passes is a named parameter of that function, and it passes no more positional arguments
  than the function takes;
- every model_init flag it builds is one `model_init.add_args` defines;
- every key it reads from the generator's results is one the generator writes;
- every other exllamav3 name it reads as a string or an attribute is one the wheel has.

    python scripts/check_exl3_api.py WHEEL [--source frank/engine/exl3/exl3_generator.py]
"""

from __future__ import annotations

import argparse
import ast
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "frank/engine/exl3/exl3_generator.py"
# What each call in the layer reaches in the wheel: (file, [class.]function)
CALLS = {
    "Generator": ("exllamav3/generator/generator.py", "Generator.__init__"),
    "Job": ("exllamav3/generator/job.py", "Job.__init__"),
    "ArgmaxSampler": ("exllamav3/generator/sampler/presets.py", "ArgmaxSampler.__init__"),
    "ComboSampler": ("exllamav3/generator/sampler/presets.py", "ComboSampler.__init__"),
    "model_init.add_args": ("exllamav3/model_init.py", "add_args"),
    "model_init.init": ("exllamav3/model_init.py", "init"),
    "self.tokenizer.encode": ("exllamav3/tokenizer/tokenizer.py", "Tokenizer.encode"),
    "self.tokenizer.hf_chat_template": ("exllamav3/tokenizer/tokenizer.py", "Tokenizer.hf_chat_template"),
    "self.generator.enqueue": ("exllamav3/generator/generator.py", "Generator.enqueue"),
    "self.generator.iterate": ("exllamav3/generator/generator.py", "Generator.iterate"),
    "self.generator.cancel": ("exllamav3/generator/generator.py", "Generator.cancel"),
    "self.generator.num_remaining_jobs": ("exllamav3/generator/generator.py", "Generator.num_remaining_jobs"),
    "self.model.forward": ("exllamav3/model/model.py", "Model.forward"),
}
RESULTS = ("r", "done")  # the layer's names for the generator's result dicts, written in job.py
RESULT_FILE = "exllamav3/generator/job.py"
# The other names the layer reads: (what, the file, how the wheel has it)
NAMES = {
    "EXPERT_STATS_DIR": ("block_sparse_mlp_cpu's module global", "exllamav3/modules/block_sparse_mlp_cpu.py", "global"),
    "eos_token_id_list": ("Config's attribute", "exllamav3/model/config.py", "attribute"),
    "default_draft_size": ("a draft model's caps key", "exllamav3/", "string"),
    "flash_attn_nc": ("an attention mode of Model.forward's params", "exllamav3/modules/", "string"),
}
# Calls on these are exllamav3's: each must be in CALLS, so a new one is checked too
EXL3_OBJECTS = ("self.generator.", "self.tokenizer.", "self.model.", "model_init.")


@dataclass
class Finding:
    ok: bool
    what: str

    def __str__(self) -> str:
        return f"{'ok     ' if self.ok else 'MISSING'}  {self.what}"


class Wheel:
    def __init__(self, path: Path) -> None:
        with zipfile.ZipFile(path) as whl:
            self.files = {n: whl.read(n).decode("utf-8", "replace") for n in whl.namelist() if n.endswith(".py")}
        self._trees: dict[str, ast.Module] = {}

    def tree(self, name: str) -> ast.Module | None:
        if name not in self.files:
            return None
        if name not in self._trees:
            self._trees[name] = ast.parse(self.files[name])
        return self._trees[name]

    def nodes(self, name: str) -> Iterator[ast.AST]:
        """Every node of one of the wheel's files (none when the wheel has no such file)."""
        tree = self.tree(name)
        return ast.walk(tree) if tree is not None else iter(())

    def function(self, name: str, qualname: str) -> ast.FunctionDef | None:
        tree = self.tree(name)
        if tree is None:
            return None
        *cls, fn = qualname.split(".")
        body = tree.body
        if cls:
            found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == cls[0]]
            if not found:
                return None
            body = found[0].body
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.name == fn:
                return node
        return None

    def module_binds(self, module: str, name: str) -> bool:
        """`from module import name` works: a submodule of that name, or a name its file binds."""
        base = module.replace(".", "/")
        if f"{base}/{name}.py" in self.files or any(f.startswith(f"{base}/{name}/") for f in self.files):
            return True
        tree = self.tree(f"{base}/__init__.py") or self.tree(f"{base}.py")
        if tree is None:
            return False
        for node in module_level(tree.body):
            if isinstance(node, (ast.ImportFrom, ast.Import)) and any((a.asname or a.name) == name for a in node.names):
                return True
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
                return True
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return True
        return False

    def has(self, name: str, where: str, how: str) -> bool:
        """`name` in the wheel's files under `where`: a module global, a `self.name =` attribute, or a string."""
        if how == "global":
            return self.module_binds(where.removesuffix(".py").replace("/", "."), name)
        for file in (f for f in self.files if f.startswith(where)):
            for n in self.nodes(file):
                if how == "attribute" and isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    if n.attr == name:
                        return True
                if how == "string" and isinstance(n, ast.Constant) and n.value == name:
                    return True
        return False


def module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's statements, those inside its if/try/with blocks too (ext.py binds its extension under an
    if), never a function's or a class's."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                yield from module_level(getattr(node, block, []))
        elif isinstance(node, ast.ExceptHandler):
            yield from module_level(node.body)


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return ""


def check_call(call: ast.Call, name: str, wheel: Wheel) -> list[Finding]:
    file, qualname = CALLS[name]
    fn = wheel.function(file, qualname)
    where = f"{name}() (line {call.lineno})"
    if fn is None:
        return [Finding(False, f"{where}: {qualname} is not in {file}")]
    a = fn.args
    params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    positional = len(a.posonlyargs + a.args) - (1 if params and params[0] == "self" else 0)
    found = []
    if len(call.args) > positional and a.vararg is None:
        found.append(Finding(False, f"{where}: {len(call.args)} positional arguments, {qualname} takes {positional}"))
    for kw in call.keywords:
        if kw.arg is None:  # our **mapping: only a function that takes **kwargs can take it
            ok = a.kwarg is not None
            found.append(Finding(ok, f"{where}: **mapping into {qualname}'s **{a.kwarg.arg if a.kwarg else '(none)'}"))
        else:
            found.append(Finding(kw.arg in params, f"{where}: {kw.arg}= is a parameter of {qualname} in {file}"))
    if not call.keywords and not found:
        found.append(Finding(True, f"{where}: {qualname} in {file}"))
    return found


def check(wheel_path: Path, source: Path = SOURCE) -> list[Finding]:
    wheel = Wheel(wheel_path)
    tree = ast.parse(source.read_text())
    found: list[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "exllamav3":
            for alias in node.names:
                ok = wheel.module_binds(node.module, alias.name)
                found.append(Finding(ok, f"from {node.module} import {alias.name} (line {node.lineno})"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for call in calls:
        name = dotted(call.func)
        if name in CALLS:
            found += check_call(call, name, wheel)
    # the flags exl3_argv gives model_init: the options its add_args defines
    add_args = wheel.function("exllamav3/model_init.py", "add_args")
    options = {
        c.value
        for n in (ast.walk(add_args) if add_args is not None else ())
        if isinstance(n, ast.Call) and dotted(n.func).endswith("add_argument")
        for c in n.args
        if isinstance(c, ast.Constant) and isinstance(c.value, str)
    }
    argv_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "exl3_argv")
    for c in ast.walk(argv_fn):
        if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith("--"):
            found.append(Finding(c.value in options, f"model_init flag {c.value} is defined by add_args"))
    # the keys read from the generator's results: written as literals in job.py
    written = {n.value for n in wheel.nodes(RESULT_FILE) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    getters = {f"{r}.get" for r in RESULTS}
    for call in calls:
        if dotted(call.func) in getters and call.args and isinstance(call.args[0], ast.Constant):
            key = call.args[0].value
            found.append(
                Finding(key in written, f'result key "{key}" (line {call.lineno}) is written in {RESULT_FILE}')
            )
    for name, (what, where, how) in NAMES.items():
        found.append(Finding(wheel.has(name, where, how), f"{name}: {what} ({how} in {where})"))
    imported = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("exllamav3")
        for a in n.names
    }
    for call in calls:
        name = dotted(call.func)
        if name not in CALLS and (name.startswith(EXL3_OBJECTS) or name in imported):
            found.append(Finding(False, f"{name}() (line {call.lineno}): an exllamav3 call CALLS does not map"))
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("wheel", type=Path)
    p.add_argument("--source", type=Path, default=SOURCE)
    args = p.parse_args(argv)
    for path in (args.wheel, args.source):
        if not path.is_file():
            p.error(f"{path}: no such file")
    if not zipfile.is_zipfile(args.wheel):
        p.error(f"{args.wheel}: not a wheel (not a zip archive)")
    found = check(args.wheel, args.source)
    for f in found:
        print(f)
    missing = [f for f in found if not f.ok]
    print(f"{len(found) - len(missing)} of {len(found)} found in {args.wheel.name}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
