"""One agent episode with inspect-ai. Runs in the agent venv (.venv-agent), never in the console's:

    .venv-agent/bin/python -m frank.episodes.inspect_harness SPEC.json     # one episode
    .venv-agent/bin/python -m frank.episodes.inspect_harness --worker      # one spec path per stdin line

SPEC.json (written by frank.episodes.harness) names the task, its instruction, the workspace folder, the
tools, the limits, the OpenAI-compatible endpoint (the recorder in front of the engine) and the sampling
settings. The episode is one inspect Task with one Sample, solved with inspect's bash, python and
text-editor tools in the `frank-bwrap` sandbox (frank.episodes.inspect_sandbox) by inspect's ReAct agent
(the engine's own tool calls: `tool_calls` "native") or by frank's loop of constrained calls
(frank.episodes.schema_agent: "schema", for a model that cannot call tools on its own): bubblewrap
namespaces that see the episode's workspace at /workspace and nothing of the project, the run folder or
the hidden answers. The finished workspace stays behind for the suite's grader. Grading happens in
frank, not here: one grader home for episodes and for `frank episodes check --references`.

The result (the path in the spec's `result`) is one JSON object: the sample's client times from inspect's
log (total and working), token use, the number of model requests, turns, tool calls (and how many reached
the sandbox), refused answers, the last tool call, and the error if the sample or the eval failed. Imports:
the standard library, inspect-ai, jsonschema and frank's agent-venv modules (the sandbox, which adds only
the standard-library frank.episodes.sandbox, and the schema agent).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.agent import AgentPrompt, react
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig
from inspect_ai.tool import bash, python, text_editor
from inspect_ai.util import SandboxEnvironmentSpec

from frank.episodes import inspect_sandbox  # noqa: F401 -- registers the frank-bwrap sandbox
from frank.episodes.schema_agent import schema_agent
from frank.episodes.schema_calls import SUBMIT

TOOLS = {"bash": bash, "python": python, "text_editor": text_editor}


def build_task(spec: dict[str, Any]) -> Task:
    tools = [
        TOOLS[name](timeout=spec["tool_timeout_s"]) if name != "text_editor" else TOOLS[name]()
        for name in spec["tools"]
    ]
    if spec.get("tool_calls", "native") == "schema":
        agent = schema_agent(
            spec["system_prompt"], tools, spec["max_turns"], spec["max_tokens"], spec.get("context_tokens")
        )
    else:
        agent = react(prompt=AgentPrompt(instructions=spec["system_prompt"]), tools=tools)
    sample = Sample(id=spec["task"], input=spec["instruction"], target="graded by frank")
    return Task(
        name=spec["task"],
        dataset=[sample],
        solver=agent,
        sandbox=SandboxEnvironmentSpec("frank-bwrap", spec["workspace"]),
    )


def _tool_runs(events: list[Any]) -> list[tuple[Any, int]]:
    """Each tool event with the sandbox actions of its execution. inspect opens one span per call (named by
    the function) and logs the call's event beside it, in the same order: the n-th tool span of a function
    is the n-th call of that function."""
    parent = {e.id: e.parent_id for e in events if e.event == "span_begin"}
    spans: dict[str, list[str]] = {}
    actions: dict[str, int] = {}
    for e in events:
        if e.event == "span_begin" and e.type == "tool":
            spans.setdefault(e.name, []).append(e.id)
            actions[e.id] = 0
    for e in events:
        if e.event == "sandbox":
            span = e.span_id
            while span is not None and span not in actions:
                span = parent.get(span)
            if span is not None:
                actions[span] += 1
    runs: list[tuple[Any, int]] = []
    seen: dict[str, int] = {}
    for e in events:
        if e.event == "tool":
            n = seen[e.function] = seen.get(e.function, -1) + 1
            ids = spans.get(e.function, [])
            runs.append((e, actions[ids[n]] if n < len(ids) else 0))
    return runs


def summarize(log: Any) -> dict[str, Any]:
    """What frank needs from the eval log: times, tokens, requests, turns, tool calls, refused answers,
    errors. `tool_calls` counts calls of the task's tools that inspect ran (submit and refused answers are
    not among them: a call inspect refused before it reached the tool); `calls_in_sandbox` those whose
    execution reached the sandbox; `tool_errors` those that returned an error."""
    out: dict[str, Any] = {"eval_status": log.status, "error": None}
    if log.error is not None:
        out["error"] = f"eval: {log.error.message}"
    samples = log.samples or []
    if not samples:
        out["error"] = out["error"] or "eval: no sample in the log"
        return out
    sample = samples[0]
    usage_in = usage_out = usage_cached = 0
    requests = model_errors = longest_prompt = 0
    model_s = tool_s = 0.0
    call_s: list[float | None] = []  # per model call; None for a call whose time inspect did not record
    tool_calls = in_sandbox = tool_errors = outputs_cut = 0
    refused: list[str] = []
    for event in sample.events:
        if event.event == "model":  # every call reached the engine, the one a limit then cut off included
            requests += 1
            model_s += float(event.working_time or 0.0)
            call_s.append(None if event.working_time is None else round(float(event.working_time), 6))
            if event.error:
                model_errors += 1
            if event.output is not None and event.output.usage is not None:
                usage = event.output.usage
                # the engine's prompt_tokens: inspect takes the prompt-cache hits out of input_tokens
                cached = (usage.input_tokens_cache_read or 0) + (usage.input_tokens_cache_write or 0)
                usage_in += usage.input_tokens + cached
                usage_cached += usage.input_tokens_cache_read or 0
                usage_out += usage.output_tokens
                longest_prompt = max(longest_prompt, usage.input_tokens + cached)
        elif event.event == "tool":
            tool_s += float(event.working_time or 0.0)
    for event, sandbox_actions in _tool_runs(sample.events):
        if event.function == SUBMIT:
            continue
        if event.error is not None and event.error.type == "parsing" and sandbox_actions == 0:
            refused.append(f"{event.function}: {event.error.message}"[:200])  # inspect refused it: nothing ran
            continue
        tool_calls += 1
        in_sandbox += sandbox_actions > 0
        tool_errors += event.error is not None
        outputs_cut += event.truncated is not None
    turns = 0
    submitted = False
    last_tool = None
    bounds = []  # schema mode: each request's upper bound on prompt tokens (frank.episodes.schema_agent)
    for msg in sample.messages:
        if msg.role == "assistant":
            turns += 1
            if (msg.metadata or {}).get("frank_prompt_bound") is not None:
                bounds.append(msg.metadata["frank_prompt_bound"])
            for call in msg.tool_calls or []:
                submitted = submitted or call.function == SUBMIT
                last_tool = {"function": call.function, "arguments": json.dumps(call.arguments)[:200]}
        elif msg.role == "user" and (msg.metadata or {}).get("frank_refused"):
            refused.append(msg.metadata["frank_refused"][:200])
    out.update(
        {
            "client_s": sample.total_time,
            "working_s": sample.working_time,
            "model_s": round(model_s, 6),
            "tool_s": round(tool_s, 6),
            "call_s": call_s,
            "requests": requests,
            "model_errors": model_errors,
            "prompt_tokens": usage_in,
            "cached_prompt_tokens": usage_cached,
            "completion_tokens": usage_out,
            "longest_prompt_tokens": longest_prompt,
            "longest_prompt_bound": max(bounds) if bounds else None,
            "turns": turns,
            "tool_calls": tool_calls,
            "calls_in_sandbox": in_sandbox,
            "tool_errors": tool_errors,
            "outputs_cut": outputs_cut,
            "invalid_answers": len(refused),
            "invalid_reasons": refused[:5],
            "submitted": submitted,
            "last_tool": last_tool,
            "limit": sample.limit.type if sample.limit is not None else None,
        }
    )
    if sample.error is not None:
        out["error"] = f"sample: {sample.error.message}"
    return out


def run(spec: dict[str, Any]) -> dict[str, Any]:
    # the engine's model through the recorder; nothing else may be reached (see harness.offline_env)
    config = GenerateConfig(
        temperature=spec["temperature"],
        seed=spec.get("seed"),
        max_tokens=spec["max_tokens"],
        max_retries=spec["max_retries"],
        timeout=spec["request_timeout_s"],
        extra_body=spec["extra_body"],
        max_connections=1,
    )
    started = time.perf_counter()
    logs = inspect_eval(
        build_task(spec),
        model=f"openai-api/frank/{spec['model']}",
        model_base_url=spec["base_url"],
        model_args={"api_key": spec["api_key"]},
        log_dir=spec["log_dir"],
        log_format="json",
        display="none",
        turn_limit=spec["max_turns"],
        time_limit=spec["wall_time_s"],
        fail_on_error=False,
        score=False,
        max_samples=1,
        max_sandboxes=1,
        # frank follows episodes through the recorder: inspect's live sample database (written on every
        # event, for `inspect view`) would only add to the client time of each turn
        log_realtime=False,
        **config.model_dump(exclude_none=True),
    )
    out = summarize(logs[0])
    out["harness_wall_s"] = round(time.perf_counter() - started, 6)
    out["log"] = logs[0].location
    return out


def run_spec_file(path: str) -> None:
    spec = json.loads(Path(path).read_text())
    try:
        result = run(spec)
    except Exception as exc:  # the harness itself failed: frank marks the episode `error` with this
        result = {"error": f"harness: {type(exc).__name__}: {exc}"}
    tmp = Path(spec["result"] + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, spec["result"])  # frank waits for this file to appear


def main(argv: list[str]) -> int:
    if argv[1:] == ["--worker"]:  # one process for a whole run: inspect is imported once, not per episode
        for line in sys.stdin:
            if line.strip():
                run_spec_file(line.strip())
        return 0
    run_spec_file(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
