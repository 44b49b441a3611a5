"""Engine profiles (TOML) and their knobs; the engine kind (frank.engine.kinds) turns them into a command line.

A profile names its engine kind (`vllm`, the default, `llamacpp` or `exl3`), the python that runs the server
(or, for llama.cpp, a `llama-server` binary; "@env:VAR" reads either path from the environment at launch),
the model, where to listen, the parallelism, quantization, speculative decoding, extra arguments,
environment, and knobs. A knob is applied one of three ways:

- `env`: sets an environment variable (`target`); needs a restart. A value may set more variables, or give
  the target a value of its own (`with_env = { "VALUE" = { VAR = "value", ... } }`).
- `arg`: sets a command-line flag (`target` = "--flag") or a key of a profile field
  (`target` = "speculative_config.num_speculative_tokens"); needs a restart. A flag knob's value may bring
  more flags with it (`with_args = { "VALUE" = ["--flag", "value", ...] }`).
- `live`: applied to the running engine without a restart (`target` names the live handler); its value
  at start is passed in the environment variable `env`.

Built-in profiles ship in frank/engine/profiles/; users add their own in the config dir's profiles/.
Every validation error names the file and the field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frank import paths, tomlfile
from frank.engine.multi_gpu import MULTICAST_OFF_ENV
from frank.engine.profile_schema import ProfileSchema, check_flags
from frank.errors import FrankError

BUILTIN_DIR = Path(__file__).resolve().parent / "profiles"
APPLY_KINDS = ("env", "arg", "live")
ENGINE_KINDS = ("vllm", "llamacpp", "exl3")
# How an agent gets tool calls out of the served model: "native" sends the tools and reads the engine's
# parsed tool_calls; "schema" constrains each answer to a JSON schema built from the tools (structured
# output) and turns it into the call, for a model that answers in prose when merely offered tools.
TOOL_CALL_MODES = ("native", "schema")
KnobValue = str | int | float | bool  # a knob's value: one TOML scalar (the schema refuses anything else)


class ProfileError(FrankError, ValueError):
    """A profile or knob value is wrong; the message names the file and the field."""


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[KnobValue, ...]
    default: KnobValue
    apply: str
    target: str
    env: str = ""
    description: str = ""
    # an arg knob's value may bring more flags with it: str(value) -> {"--flag": "value"} (`with_args`)
    with_args: dict[str, dict[str, str]] = field(default_factory=dict)
    # an env knob's value may set more variables (or its target to another value): str(value) -> {VAR: value}
    with_env: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def needs_restart(self) -> bool:
        return self.apply != "live"

    def parse(self, text: str | Any) -> Any:
        """Turn a CLI string (or a value) into one of the allowed values, or raise naming the knob."""
        for value in self.values:
            if value == text or str(value).lower() == str(text).lower():
                return value
        allowed = ", ".join(str(v) for v in self.values)
        raise ProfileError(f"knob {self.name}: {text!r} is not one of: {allowed}")


@dataclass(frozen=True)
class Profile:
    name: str
    source: Path
    description: str
    python: str
    model: str
    served_model_name: str
    host: str
    port: int | str  # an int, or "auto" for a free port chosen at start
    tensor_parallel_size: int
    quantization: str
    dtype: str
    max_model_len: int | None
    speculative_config: dict[str, Any] | None
    extra_args: tuple[str, ...]
    env: dict[str, str]
    knobs: dict[str, Knob] = field(default_factory=dict)
    api_key: str = ""
    startup_timeout_s: float = 600.0
    stop_grace_s: float = 10.0
    kind: str = "vllm"  # one of ENGINE_KINDS
    binary: str = ""  # llama.cpp only: a llama-server executable ("@env:VAR" reads its path from VAR)
    tool_calls: str = "native"  # one of TOOL_CALL_MODES: how the episodes' agent calls tools on this engine

    # -- resolution of placeholders -------------------------------------------------------------
    def python_path(self) -> Path:
        if self.python == "@engine-venv":
            return paths.engine_venv_python()
        if self.python == "@llamacpp-venv":
            return paths.llamacpp_venv_python()
        return self._path("python", self.python, "a python executable")

    def binary_path(self) -> Path:
        """The llama-server executable; "@env:VAR" reads it from the environment at launch."""
        return self._path("binary", self.binary, "the path of a llama-server executable")

    def _path(self, field: str, value: str, what: str) -> Path:
        """A path field; "@env:VAR" reads it from the environment at launch."""
        if value.startswith("@env:"):
            var = value.removeprefix("@env:")
            value = os.environ.get(var, "")
            if not value:
                raise ProfileError(f"{self.source}: {field}: the environment variable {var} is not set ({what})")
        return Path(value).expanduser()

    def model_path(self) -> str:
        if self.model.startswith("@models/"):
            return str(paths.models_dir() / self.model.removeprefix("@models/"))
        return self.model

    def resolved_extra_args(self) -> list[str]:
        """extra_args with "@models/PATH" (the models dir) and "@frank/PATH" (this package) made absolute."""
        out = []
        for arg in self.extra_args:
            if arg.startswith("@models/"):
                arg = str(paths.models_dir() / arg.removeprefix("@models/"))
            elif arg.startswith("@frank/"):
                arg = str(Path(__file__).resolve().parent.parent / arg.removeprefix("@frank/"))
            out.append(arg)
        return out

    # -- knob values ----------------------------------------------------------------------------
    def default_knobs(self) -> dict[str, KnobValue]:
        return {name: knob.default for name, knob in self.knobs.items()}

    def resolve_knobs(self, overrides: dict[str, Any] | None = None) -> dict[str, KnobValue]:
        """Defaults with overrides applied; unknown knob names and bad values raise ProfileError."""
        values = self.default_knobs()
        for name, raw in (overrides or {}).items():
            if name not in self.knobs:
                known = ", ".join(sorted(self.knobs)) or "none"
                raise ProfileError(f"profile {self.name}: unknown knob {name!r} (knobs: {known})")
            values[name] = self.knobs[name].parse(raw)
        return values


@dataclass(frozen=True)
class LaunchSpec:
    """The exact command line and environment (only what frank sets; the rest is inherited)."""

    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    # what the launch resolved on this machine or warns of, a line each (the dry run, the start and the status
    # show them): a thread count derived from the cores, a setting measured to be slow
    notes: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True)
class KnobSettings:
    """What knob values change at launch: environment variables, flag values, speculative_config keys."""

    env: dict[str, str]
    flags: dict[str, str]
    speculative: dict[str, Any]


def knob_settings(profile: Profile, knobs: dict[str, Any]) -> KnobSettings:
    env: dict[str, str] = {}
    flags: dict[str, str] = {}
    speculative: dict[str, Any] = {}
    for name, value in knobs.items():
        knob = profile.knobs[name]
        if knob.apply == "env":
            env[knob.target] = str(value)
            env.update(knob.with_env.get(str(value), {}))
        elif knob.apply == "live":
            if knob.env:
                env[knob.env] = str(value)
        elif knob.target.startswith("speculative_config."):
            if profile.speculative_config is None:
                raise ProfileError(f"{profile.source}: knobs.{name}.target: the profile has no speculative_config")
            speculative[knob.target.split(".", 1)[1]] = value
        else:
            flags[knob.target] = str(value)
            flags.update(knob.with_args.get(str(value), {}))
    return KnobSettings(env=env, flags=flags, speculative=speculative)


def with_flags(argv: list[str], flags: dict[str, str]) -> list[str]:
    """argv with each knob's flag value: a knob replaces the profile's own value, never repeats the flag."""
    out = list(argv)
    for flag, value in flags.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


# -- loading and validation -------------------------------------------------------------------------


def parse_profile(data: dict[str, Any], source: Path, lines: tomlfile.KeyLines | None = None) -> Profile:
    """A profile from its TOML data: the typed schema (frank.engine.profile_schema), then what ties its
    fields together; every refusal names the file, the line where it can be found, and the field."""
    where = str(source)

    def refuse(field: str, message: str) -> ProfileError:
        # tomlfile.refusal returns the FrankError that `ProfileError` made (not generic over the class)
        return tomlfile.refusal(ProfileError, source, lines, field, message)  # type: ignore[return-value]

    tomlfile.check_plain(data, source, lines, ProfileError)
    kind = data.get("kind", "vllm") if isinstance(data, dict) else "vllm"
    if kind not in ENGINE_KINDS:  # first: what else the profile needs depends on its kind
        raise refuse("kind", f"{kind!r} is not one of: {', '.join(ENGINE_KINDS)}")
    if "python" not in data and "binary" not in data and isinstance(data, dict):
        raise refuse("python", "missing required field (or, for a llamacpp profile, binary)")
    schema = tomlfile.validate(ProfileSchema, data, source, lines, ProfileError)
    if "binary" in data and kind != "llamacpp":
        raise refuse("binary", "only a llamacpp profile runs a binary (vLLM runs under python)")
    if "speculative_config" in data and kind != "vllm":
        raise refuse("speculative_config", f"vLLM's; a {kind} profile sets speculation by flags")
    if schema.tool_calls not in TOOL_CALL_MODES:
        raise refuse("tool_calls", f"{schema.tool_calls!r} is not one of: {', '.join(TOOL_CALL_MODES)}")
    knobs = {name: _parse_knob(name, raw.model_dump(), where, refuse) for name, raw in schema.knobs.items()}
    problems = check_flags(schema) + _multicast_problems(schema)
    if problems:
        raise refuse(*problems[0])
    return Profile(
        name=schema.name,
        source=source,
        description=schema.description,
        python=schema.python,
        model=schema.model,
        served_model_name=schema.served_model_name,
        host=schema.host,
        port=schema.port,
        tensor_parallel_size=schema.tensor_parallel_size,
        quantization=schema.quantization,
        dtype=schema.dtype,
        max_model_len=schema.max_model_len,
        speculative_config=schema.speculative_config,
        extra_args=tuple(schema.extra_args),
        env={k: str(v) for k, v in schema.env.items()},
        knobs=knobs,
        api_key=schema.api_key,
        startup_timeout_s=float(schema.startup_timeout_s),
        stop_grace_s=float(schema.stop_grace_s),
        kind=kind,
        binary=schema.binary,
        tool_calls=schema.tool_calls,
    )


def _multicast_problems(schema: ProfileSchema) -> list[tuple[str, str]]:
    """(field, reason) for an env entry or a knob that would turn NVLink multicast back on: every launch
    keeps it off (frank.engine.multi_gpu), and a profile that asks otherwise is refused, not overridden."""
    why = "NVLink multicast stays off in every engine's environment (frank.engine.multi_gpu)"
    problems = [
        (f"env.{key}", f"{key} = {value!r}: {why}; frank sets {key}={MULTICAST_OFF_ENV[key]}")
        for key, value in schema.env.items()
        if key in MULTICAST_OFF_ENV and str(value) != MULTICAST_OFF_ENV[key]
    ]
    for name, knob in schema.knobs.items():
        var = knob.target if knob.apply == "env" else knob.env
        if var in MULTICAST_OFF_ENV:
            field = f"knobs.{name}.target" if knob.apply == "env" else f"knobs.{name}.env"
            problems.append((field, f"a knob may not set {var}: {why}"))
        for value, names in knob.with_env.items():
            for var in set(names) & set(MULTICAST_OFF_ENV):
                problems.append((f"knobs.{name}.with_env.{value}", f"a knob may not set {var}: {why}"))
    return problems


def _parse_knob(name: str, raw: dict[str, Any], where: str, refuse: Callable[[str, str], ProfileError]) -> Knob:
    prefix = f"knobs.{name}"
    if raw["apply"] not in APPLY_KINDS:
        raise refuse(f"{prefix}.apply", f"{raw['apply']!r} is not one of: {', '.join(APPLY_KINDS)}")
    if raw["default"] not in raw["values"] or not any(
        type(v) is type(raw["default"]) and v == raw["default"] for v in raw["values"]
    ):
        raise refuse(f"{prefix}.default", f"{raw['default']!r} is not one of the values {raw['values']}")
    if raw["apply"] == "arg" and not (
        raw["target"].startswith("--") or raw["target"].startswith("speculative_config.")
    ):
        raise refuse(
            f"{prefix}.target", f'an arg knob targets "--flag" or "speculative_config.KEY", got {raw["target"]!r}'
        )
    if len({str(v).lower() for v in raw["values"]}) != len(raw["values"]):
        raise refuse(f"{prefix}.values", f"two values read the same on the command line: {raw['values']}")
    return Knob(
        name=name,
        values=tuple(raw["values"]),
        default=raw["default"],
        apply=raw["apply"],
        target=raw["target"],
        env=raw.get("env", ""),
        description=raw.get("description", ""),
        with_args=_parse_with_args(raw, prefix, refuse),
        with_env=_parse_with_env(raw, prefix, refuse),
    )


def _parse_with_args(
    raw: dict[str, Any], prefix: str, refuse: Callable[[str, str], ProfileError]
) -> dict[str, dict[str, str]]:
    """`with_args = { "VALUE" = ["--flag", "value", ...] }`: flags an arg knob adds when it has VALUE."""
    out: dict[str, dict[str, str]] = {}
    if raw.get("with_args") and (raw["apply"] != "arg" or not raw["target"].startswith("--")):
        raise refuse(f"{prefix}.with_args", "only a knob that sets a --flag can bring more flags")
    for value, where, pairs in _per_value(raw, "with_args", prefix, refuse):
        if len(pairs) % 2 or not all(f.startswith("--") for f in pairs[::2]):
            raise refuse(where, f'expected pairs of "--flag", "value", got {pairs!r}')
        flags = pairs[::2]
        # the knob's own flag may be among them: it gives a named value its flag value (cpu_experts_sched
        # 1 | 2 -> --cpu-strict-batch 0 | 1), replacing the value itself, so the flag is still given once
        if len(set(flags)) != len(flags):
            raise refuse(where, f"a flag given twice: {pairs!r}")
        out[value] = dict(zip(flags, pairs[1::2]))
    return out


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parse_with_env(
    raw: dict[str, Any], prefix: str, refuse: Callable[[str, str], ProfileError]
) -> dict[str, dict[str, str]]:
    """`with_env = { "VALUE" = { VAR = "value", ... } }`: variables an env knob sets when it has VALUE (its own
    target among them gives a named value its variable's value: cpu_experts_sched 1 | 2 -> EXL3_MOE_CPU_PIN
    0 | 1)."""
    if raw.get("with_env") and raw["apply"] != "env":
        raise refuse(f"{prefix}.with_env", "only an env knob can set more environment variables")
    out: dict[str, dict[str, str]] = {}
    for value, where, names in _per_value(raw, "with_env", prefix, refuse):
        bad = [name for name in names if not ENV_NAME.fullmatch(name)]
        if bad:
            raise refuse(where, f"{bad[0]!r} is not an environment variable name")
        out[value] = dict(names)
    return out


def _per_value(
    raw: dict[str, Any], key: str, prefix: str, refuse: Callable[[str, str], ProfileError]
) -> Iterator[tuple[str, str, Any]]:
    """(value, field, entry) of a knob's table keyed by its values (`with_args`, `with_env`), each key one of
    the knob's values."""
    values = {str(v) for v in raw["values"]}
    for value, entry in raw.get(key, {}).items():
        where = f"{prefix}.{key}.{value}"
        if value not in values:
            raise refuse(where, f"{value!r} is not one of the values {raw['values']}")
        yield value, where, entry


def load_profile_file(path: Path) -> Profile:
    text = tomlfile.read_text(path, ProfileError)
    lines = tomlfile.KeyLines(text)
    profile = parse_profile(tomlfile.parse(text, path, ProfileError), path, lines)
    if profile.name != path.stem:
        raise tomlfile.refusal(
            ProfileError, path, lines, "name", f"{profile.name!r} must match the file name {path.stem!r}"
        )
    return profile


def profile_files() -> dict[str, Path]:
    """Profile name -> file; a user profile of the same name replaces the built-in one."""
    files = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.toml"))}
    user_dir = paths.user_profiles_dir()
    if user_dir.is_dir():
        files.update({p.stem: p for p in sorted(user_dir.glob("*.toml"))})
    return files


def load_profile(name: str) -> Profile:
    files = profile_files()
    if name not in files:
        raise ProfileError(
            f"no profile named {name!r} (profiles: {', '.join(sorted(files))}; "
            f"add your own in {paths.user_profiles_dir()})"
        )
    return load_profile_file(files[name])


def list_profiles() -> list[Profile | ProfileError]:
    """Every profile, or the error that keeps it from loading (so one bad file hides nothing else)."""
    out: list[Profile | ProfileError] = []
    for path in profile_files().values():
        try:
            out.append(load_profile_file(path))
        except ProfileError as exc:
            out.append(exc)
    return out


DEFAULT_PROFILE = "embedded-cpu"
