"""Shared design and fleet text for the experiment and fleet unit tests (not a test module)."""

from __future__ import annotations

BLOCKS_DESIGN = """
name = "spec-tokens"
question = "Do 2 speculative tokens give shorter verify steps than 4?"
profile = "embedded-cpu"

[[arms]]
name = "spec-4"
knobs = { num_speculative_tokens = 4 }

[[arms]]
name = "spec-2"
knobs = { num_speculative_tokens = 2 }

[design]
kind = "blocks"
blocks = 3

[workload]
name = "tiny"
requests = 2

[measure]
name = "time_per_verify_step"

[rule]
test = "sign"
treatment = "spec-2"
control = "spec-4"
direction = "lower"

[failure]
action = "retry"
max_retries = 1
"""

BALANCED_DESIGN = """
name = "cache"
question = "Does the region cache cut front-end time?"
profile = "embedded-cpu"

[[arms]]
name = "on"
knobs = { region_cache = "on" }

[[arms]]
name = "off"
knobs = { region_cache = "off" }

[design]
kind = "balanced"
starts_per_arm = 3

[workload]
name = "tiny"
mode = "engine"

[measure]
name = "front_end_per_draw"

[rule]
test = "permutation"
treatment = "on"
control = "off"
direction = "lower"
alpha = 0.05

[guards]
prompt_token_ids_identical = true
"""

# two hosts on loopback, each with its exporter: the fleet file of the fleet and fuzz tests
FLEET = """[prometheus]
listen = "127.0.0.1:9090"
scrape_interval_s = 2

[hosts.a]
exporter = "127.0.0.1:9464"
resource = "host-a"

[hosts.b]
exporter = "127.0.0.1:9465"
resource = "host-b"
"""
