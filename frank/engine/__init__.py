"""The engine floor: profiles and knobs, the controller and its supervisor, state, /metrics and the measures
read from it, the clients of the plugins' control endpoints, and the models frank builds."""
