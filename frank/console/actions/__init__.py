"""The console's actions, one plain object per concern (engine, jobs, experiments and fidelity, episodes,
campaign, logs), each holding the app as a Host (frank.console.host). They turn keys into calls on the
headless layers, run slow calls in thread workers, and report back through notifications and the sources.
"""
