"""FrankApp's actions, one module per concern: the engine, jobs (replays and other detached runs), experiments.

Each is a mixin of FrankApp: it turns keys into calls on the headless layers, runs slow calls in thread
workers, and reports back through typed messages (frank.console.messages) or notifications.
"""
