"""The recording proxy in front of the real engine, driven by the `openai` client library (streaming and
not), then the recording replayed; and `frank record` stopped with SIGINT keeps what it answered."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from frank.workloads.format import check_workload, load_workload
from frank.workloads.recorder import Recorder, forward_headers
from frank.workloads.replay import ReplayOptions, read_records, start_replay

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def test_forward_headers_keep_the_key_and_drop_hop_by_hop():
    raw = [
        (b"Host", b"x"),
        (b"Authorization", b"Bearer sk-1"),
        (b"Connection", b"keep-alive"),
        (b"Content-Length", b"12"),
        (b"X-Trace", b"t"),
    ]
    assert forward_headers(raw) == [("Authorization", "Bearer sk-1"), ("X-Trace", "t")]
    assert forward_headers([(b"Host", b"x")], api_key="sk-2") == [("Authorization", "Bearer sk-2")]
    assert forward_headers(raw, api_key="sk-2")[0] == ("Authorization", "Bearer sk-1")  # the client's wins


async def test_recorded_session_is_a_valid_workload_that_replays(engine, tmp_path):
    url = engine.status().url
    rec = Recorder(url, tmp_path / "recording")
    await rec.start()
    assert rec.host == "127.0.0.1"
    client = openai.AsyncOpenAI(base_url=rec.url + "/v1", api_key="sk-frank-test", max_retries=0)
    try:
        model = (await client.models.list()).data[0].id  # passes through, not recorded
        messages = [
            {"role": "system", "content": "You are a careful coding agent. " * 40},
            {"role": "user", "content": "Read setup.py and tell me what it installs."},
        ]
        first = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS, max_tokens=6)
        assert first.usage.completion_tokens >= 1
        messages += [
            {"role": "assistant", "content": first.choices[0].message.content or ""},
            {"role": "user", "content": "Go on."},
        ]
        stream = await client.chat.completions.create(
            model=model,
            messages=messages,
            tools=TOOLS,
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        assert chunks[-1].usage.completion_tokens >= 1 and len(chunks) > 2
        with pytest.raises(openai.NotFoundError):  # an error answer is relayed, and not recorded
            await client.chat.completions.create(model="no-such-model", messages=messages, max_tokens=2)
    finally:
        await client.close()
        await rec.close()
    assert rec.recorded == 2 and rec.forwarded == 4
    workload, errors = check_workload(tmp_path / "recording", keep=True)
    assert errors == [] and workload.draw_names == ["draw-1"]
    reqs = workload.requests["draw-1"]
    assert [(r.episode, r.turn) for r in reqs] == [("draw-1-ep1", 1), ("draw-1-ep1", 2)]
    assert reqs[1].body["messages"] == messages and reqs[1].body["stream"] is True
    assert reqs[0].body["tools"][0]["function"]["name"] == "read_file"
    assert 0 <= reqs[0].offset_s <= reqs[1].offset_s

    runner = start_replay(
        tmp_path / "recording", url, ReplayOptions(mode="full", max_tokens=4), out=tmp_path / "replayed"
    )
    summary = await runner.run()
    records = read_records(runner.draw_file("draw-1"))
    assert summary.state == "finished"
    assert [r["status"] for r in records] == ["ok", "ok"] and all(r["server"]["attributed"] for r in records)


def test_frank_record_survives_sigint_with_every_answer_on_disk(engine, tmp_path):
    url = engine.status().url
    out = tmp_path / "cli-recording"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "frank.console.cli",
            "record",
            "--upstream",
            url,
            "--listen",
            "127.0.0.1:0",
            "--out",
            str(out),
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        line = proc.stderr.readline()
        listen = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        assert listen, line
        client = openai.OpenAI(base_url=listen.group(1) + "/v1", api_key="sk-x", max_retries=0)
        for i in range(2):
            client.chat.completions.create(
                model="tiny-frank", max_tokens=2, messages=[{"role": "user", "content": f"request {i}"}]
            )
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert json.loads(stdout)["recorded"] == 2
    assert len(load_workload(out).requests["draw-1"]) == 2
    # a second session adds a draw next to the first
    rec = Recorder(url, out)
    assert rec.draw_name == "draw-2"
    rec.writer.close()
