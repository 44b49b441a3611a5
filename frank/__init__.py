"""frank: an operator console for an LLM inference workstation.

One floor per concept, each importing only the floors below it (pyproject.toml's import-linter contract):

    console      Textual app, screens, widgets, themes and the `frank` CLI: the only importer of textual
    campaign     the ledger of parts: the campaign file, its fsynced history, evidence, serve/revert, watch
    experiments  designs, registration, randomized order, runner + journal, exact tests, reports
    episodes     task suites, graded W01-like tasks, the agent harness adapter
    fidelity     text sets, the KL measure, the reference side, runs and floors
    workloads    workload format, the one catalog, synthetic W01, the recorder, the replay runner
    jobs         detached runs: launch, lock, status, follow, cancel, list
    reports      self-contained HTML pages and their plots
    engine       profiles, controller, supervisor, telemetry, /metrics, measures, region cache, built models
    paths        where frank keeps its files;  jsonl: the one reader and writer of append-only record files
    errors       the one error base class
"""
