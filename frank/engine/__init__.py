"""The engine floor: profiles and knobs, the controller and its supervisor, state, telemetry, /metrics and
the measures read from it, the region cache and the other vLLM plugins, and the models frank builds."""
