"""The generator layer over exllamav3 1.6.5 itself: the model, caches and draft loaded by exllamav3's own
`model_init` (the flags of its example scripts; the adapter's own flags map onto them), generation by its
`Generator` and `Job`, prompt log-probabilities by one `model.forward` over the prompt. Needs CUDA (its
extension compiles for the GPU on first import), so nothing here runs on a machine without one:
tests/unit/test_exl3_adapter.py tests the HTTP side over fake_no_cuda instead, and scripts/device_exl3.sh
runs this on the H200 machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from typing import Any

from frank.engine.exl3.ext_check import refuse_static_libstdcxx
from frank.engine.exl3.generator import Event, Finished, Piece, Sampling


def exl3_argv(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """exllamav3 model_init's flags for the adapter's: the model, the cache (the served context), the DSpark
    stage of the same checkpoint as the draft (`--mtp`: exllamav3 loads DeepSeek-V4's mtp.* tensors as its
    draft component), then any exllamav3 flag the profile passes through unchanged."""
    argv = ["--model_dir", args.model, "--cache_size", str(args.max_model_len)]
    if args.spec_type == "draft-dspark":
        argv += ["--mtp"]
        if args.draft_tokens:
            argv += ["--num_draft_tokens", str(args.draft_tokens)]
    return argv + extra


class Exl3Generator:
    def __init__(self, args: argparse.Namespace, extra: list[str]) -> None:
        # The extension first (its first import compiles it), checked before anything of the CPU pool runs: one
        # with libstdc++ linked in statically crashes there (ext_check.py says why)
        from exllamav3.ext import exllamav3_ext

        refuse_static_libstdcxx(exllamav3_ext.__file__)
        if args.expert_stats_dir:
            # A fresh routing profile per start: exllamav3 saves the hot/cold ranking of each model under
            # ~/.cache and the next load starts from it, which would carry one start's placement into the next.
            from exllamav3.modules import block_sparse_mlp_cpu

            block_sparse_mlp_cpu.EXPERT_STATS_DIR = args.expert_stats_dir
        from exllamav3 import Generator, model_init

        parser = argparse.ArgumentParser(prog="exllamav3.model_init")
        model_init.add_args(parser, cache=True, add_draft_model_args=True)
        ns = parser.parse_args(exl3_argv(args, extra))
        loaded = model_init.init(ns, progress=False)
        self.model, self.config, cache, self.tokenizer, draft_model, _, draft_cache = loaded
        self.max_model_len = args.max_model_len
        self.num_draft_tokens = (
            (ns.num_draft_tokens or draft_model.caps.get("default_draft_size", 4)) if draft_model else 0
        )
        self.generator = Generator(
            model=self.model,
            cache=cache,
            tokenizer=self.tokenizer,
            draft_model=draft_model,
            draft_cache=draft_cache,
            num_draft_tokens=self.num_draft_tokens if draft_model else None,
            max_batch_size=1,
        )
        self.drafting = draft_model is not None

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_bos=True, encode_special_tokens=True)[0].tolist()]

    def chat_prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        kwargs = {"tools": tools} if tools else {}
        return [int(t) for t in self.tokenizer.hf_chat_template(messages, add_generation_prompt=True, **kwargs)[0]]

    def _sampler(self, sampling: Sampling) -> Any:
        from exllamav3.generator.sampler import ArgmaxSampler, ComboSampler

        if sampling.temperature <= 0:
            return ArgmaxSampler()
        return ComboSampler(temperature=sampling.temperature, top_p=sampling.top_p, min_p=0.0)

    def generate(self, prompt: list[int], sampling: Sampling) -> Iterator[Event]:
        import torch
        from exllamav3 import Job

        job = Job(
            input_ids=torch.tensor([prompt], dtype=torch.long),
            max_new_tokens=sampling.max_tokens,
            sampler=self._sampler(sampling),
            seed=sampling.seed,
            stop_conditions=[*([] if sampling.ignore_eos else self.config.eos_token_id_list), *sampling.stop],
            decode_special_tokens=True,  # the tool-call blocks are special tokens
        )
        self.generator.enqueue(job)
        first, done = True, None
        try:
            while done is None and self.generator.num_remaining_jobs():
                t0 = time.perf_counter()
                results = self.generator.iterate()
                step_s = time.perf_counter() - t0
                for r in results:
                    if r.get("job") is not job or r.get("stage") != "streaming":
                        continue
                    ids = r.get("token_ids")
                    n = int(ids.shape[-1]) if ids is not None else 0
                    if n or r.get("text"):
                        drafted = self.num_draft_tokens if self.drafting and not first else 0
                        yield Piece(r.get("text", ""), n, step_s, drafted)
                        first = False
                    if r.get("eos"):
                        done = r
        finally:
            if done is None:  # the client went away: free the generator for the next request
                self.generator.cancel(job)
        if done is None:
            raise RuntimeError("exllamav3's generator ran out of jobs before this one ended")
        yield Finished(
            finish_reason="length" if done.get("eos_reason") == "max_new_tokens" else "stop",
            prompt_tokens=int(done.get("prompt_tokens", len(prompt))),
            cached_tokens=int(done.get("cached_tokens", 0)),
            completion_tokens=int(done.get("new_tokens", 0)),
            prefill_s=float(done.get("time_prefill", 0.0)),
            decode_s=float(done.get("time_generate", 0.0)),
            accepted_tokens=int(done.get("accepted_draft_tokens", 0)),
        )

    def prompt_logprobs(self, prompt: list[int], k: int) -> list[dict[int, float]]:
        import torch

        with torch.inference_mode():
            ids = torch.tensor([prompt], dtype=torch.long)
            logits = self.model.forward(input_ids=ids, params={"attn_mode": "flash_attn_nc"})
            logprobs = torch.log_softmax(logits[0, :-1].float(), dim=-1)
            top = torch.topk(logprobs, k, dim=-1)
            actual = logprobs.gather(1, ids[0, 1:].to(logprobs.device).unsqueeze(1))[:, 0]
        rows = []
        for t in range(len(prompt) - 1):
            row = dict(zip(top.indices[t].tolist(), top.values[t].tolist()))
            row.setdefault(prompt[t + 1], float(actual[t]))  # vLLM's answer holds the actual next token too
            rows.append(row)
        return rows
