"""The typed schema of an engine profile's TOML (pydantic, strict) and the flags a profile may not set.

Types, ranges and unknown fields are the schema's; what ties fields together (a knob's default among its
values, a with_args only on a flag knob) stays in frank.engine.profiles, and `check_flags` refuses what
would silently override something: frank's own flags (where it listens, what it serves, the key), a flag
that a profile field sets given again in extra_args, a knob's flag also in extra_args, two knobs on one
flag. Every refusal names the file, the line and the field (frank.tomlfile).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from frank.tomlfile import Strict

MAX_KNOB_VALUES = 256
# Flags frank sets itself for each engine kind and a profile may never give: the record's URL, the served
# name clients ask for and the key they send depend on them.
OWNED_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--host": "host",
        "--port": "port",
        "--model": "model",
        "--served-model-name": "served_model_name",
        "--api-key": "api_key",
    },
    "llamacpp": {
        "--host": "host",
        "--port": "port",
        "--model": "model",
        "-m": "model",
        "--alias": "served_model_name",
        "-a": "served_model_name",
        "--api-key": "api_key",
        "--api-key-file": "api_key",
        "--metrics": "(always on: frank reads /metrics)",
        "--jinja": "(always on: chat templates)",
    },
    "exl3": {
        "--host": "host",
        "--port": "port",
        "--model": "model",
        "--served-model-name": "served_model_name",
    },
}
# Flags frank builds from a profile field: a knob may set them (it replaces the field's value), extra_args
# may not (two values of one setting, the later silently winning).
FIELD_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--tensor-parallel-size": "tensor_parallel_size",
        "--quantization": "quantization",
        "--dtype": "dtype",
        "--max-model-len": "max_model_len",
        "--speculative-config": "speculative_config",
    },
    "llamacpp": {"--ctx-size": "max_model_len", "-c": "max_model_len"},
    "exl3": {"--max-model-len": "max_model_len"},
}


def flag_name(kind: str, arg: str) -> str:
    """A command-line token as the flag it sets: `--port=1` -> `--port`; vLLM reads `--max_model_len` as
    `--max-model-len`."""
    flag = arg.split("=", 1)[0]
    if kind == "vllm" and flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")
    return flag


def _scalar(value: Any, what: str = "a value") -> Any:
    if isinstance(value, (str, int, float)):  # bool is an int; a TOML date was refused before
        return value
    raise ValueError(f"expected a string, number or boolean as {what}, got {value!r}")


class KnobSchema(Strict):
    values: list[Any] = Field(min_length=1, max_length=MAX_KNOB_VALUES)
    default: Any
    apply: str
    target: str = Field(min_length=1)
    env: str = ""
    description: str = ""
    with_args: dict[str, list[str]] = Field(default_factory=dict)
    with_env: dict[str, dict[str, str]] = Field(default_factory=dict)

    @field_validator("values")
    @classmethod
    def _values(cls, values: list[Any]) -> list[Any]:
        for value in values:
            _scalar(value, "a knob value")
        return values

    @field_validator("default")
    @classmethod
    def _default(cls, value: Any) -> Any:
        return _scalar(value, "the default")


class ProfileSchema(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    kind: str = "vllm"
    binary: str = ""
    python: str = ""
    model: str = Field(min_length=1)
    served_model_name: str = Field(min_length=1)
    host: str = Field("127.0.0.1", min_length=1)
    port: Any = "auto"
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    quantization: str = ""
    dtype: str = ""
    max_model_len: int | None = Field(None, ge=16, le=1 << 24)
    speculative_config: dict[str, Any] | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)
    knobs: dict[str, KnobSchema] = Field(default_factory=dict)
    api_key: str = ""
    startup_timeout_s: float = Field(600.0, gt=0, le=86400)
    stop_grace_s: float = Field(10.0, ge=0, le=3600)
    tool_calls: str = "native"

    @field_validator("port")
    @classmethod
    def _port(cls, port: Any) -> Any:
        if isinstance(port, bool) or not isinstance(port, (int, str)) or (isinstance(port, str) and port != "auto"):
            raise ValueError(f'expected an integer or "auto", got {port!r}')
        if isinstance(port, int) and not 0 < port < 65536:
            raise ValueError(f"{port} is out of range 1-65535")
        return port

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, Any]) -> dict[str, str | int | float]:
        for key, value in env.items():
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise ValueError(f"env.{key}: expected a string or number, got {value!r}")
        return env

    @field_validator("speculative_config")
    @classmethod
    def _spec(cls, config: dict[str, Any] | None) -> dict[str, str | int | float | bool] | None:
        for key, value in (config or {}).items():
            _scalar(value, f"speculative_config.{key}")
        return config


def check_flags(schema: ProfileSchema) -> list[tuple[str, str]]:
    """(field, reason) for every flag of the profile that would override frank's own or another's."""
    kind = schema.kind if schema.kind in OWNED_FLAGS else "vllm"
    owned, fields = OWNED_FLAGS[kind], FIELD_FLAGS[kind]
    problems: list[tuple[str, str]] = []
    in_extra: dict[str, int] = {}
    for i, arg in enumerate(schema.extra_args):
        if not arg.startswith("-") or arg.lstrip("-").replace(".", "").isdigit():
            continue  # a value (a negative number is not a flag)
        flag = flag_name(kind, arg)
        if flag in owned:
            problems.append((f"extra_args[{i}]", f"{arg} is frank's own flag (set from {owned[flag]})"))
        elif flag in fields:
            problems.append((f"extra_args[{i}]", f"{arg} is set from the profile's {fields[flag]}: set that instead"))
        in_extra.setdefault(flag, i)
    by_flag: dict[str, str] = {}
    for name, knob in schema.knobs.items():
        if knob.apply != "arg" or not knob.target.startswith("-"):
            continue
        flags = [(f"knobs.{name}.target", flag_name(kind, knob.target))]
        flags += [
            (f"knobs.{name}.with_args.{value}", flag_name(kind, flag))
            for value, args in knob.with_args.items()
            for flag in args[::2]
        ]
        problems += _own_flag_contradictions(kind, name, knob)
        mine: set[str] = set()
        for field, flag in flags:
            if flag in owned:
                problems.append((field, f"{flag} is frank's own flag (set from {owned[flag]})"))
            elif flag in in_extra:
                problems.append(
                    (field, f"{flag} is also given in extra_args[{in_extra[flag]}]: the knob would override it")
                )
            elif flag in by_flag and flag not in mine:
                problems.append((field, f"{flag} is set by {by_flag[flag]} too: two knobs on one flag"))
            mine.add(flag)
        for _, flag in flags:
            by_flag.setdefault(flag, f"knobs.{name}")
    return problems


def _own_flag_contradictions(kind: str, name: str, knob: KnobSchema) -> list[tuple[str, str]]:
    """A with_args may give the knob's own flag only as a table of named values (every value mapped:
    cpu_experts_sched 1 | 2 -> --cpu-strict-batch 0 | 1); one that maps some values and not others
    contradicts the value chosen (threads = 4 giving --threads 8 beside threads = 2 giving --threads 2)."""
    own = flag_name(kind, knob.target)
    mapped = {
        value: arg
        for value, args in knob.with_args.items()
        for flag, arg in zip(args[::2], args[1::2], strict=False)
        if flag_name(kind, flag) == own
    }
    if not mapped or set(mapped) == {str(v) for v in knob.values}:
        return []
    return [
        (
            f"knobs.{name}.with_args.{value}",
            f"{own} {arg} contradicts the knob's value: {name} = {value} sets {own} {value} (a with_args "
            f"gives the knob's own flag only when it maps every value)",
        )
        for value, arg in mapped.items()
        if arg != value
    ]


def flag_origins(profile: Any) -> dict[str, str]:
    """flag -> the profile field that brings it to the command line (for an engine's refusal)."""
    kind = profile.kind
    out = {flag: field for flag, field in {**OWNED_FLAGS[kind], **FIELD_FLAGS[kind]}.items()}
    for i, arg in enumerate(profile.extra_args):
        if arg.startswith("--"):
            out.setdefault(flag_name(kind, arg), f"extra_args[{i}]")
    for name, knob in profile.knobs.items():
        if knob.apply == "arg" and knob.target.startswith("-"):
            out[flag_name(kind, knob.target)] = f"knobs.{name}"
            for value, flags in knob.with_args.items():
                for flag in flags:
                    out.setdefault(flag_name(kind, flag), f"knobs.{name}.with_args.{value}")
    return out
