"""Agent episodes: draws of a task suite run live against the engine, graded, timed, recorded.

- suite.py     the task-suite format (TOML manifest; errors name file:line: field) and suites/ (the W01-like one)
- tasks.py     workspace generators for the built-in W01-like suite
- grade.py     graders and reference solutions: where a finished workspace is judged
- harness.py   the console side of the agent harness; inspect_harness.py runs one episode in the agent venv
- runner.py    episode runs: records, resume, measures; job.py the `episodes` job kind
"""
