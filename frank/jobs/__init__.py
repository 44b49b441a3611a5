"""Long runs as detached jobs: replays, experiments (and any other kind) outlive the terminal.

A job is one run folder worked on by one process at a time; one module per concern:

- kinds.py: what a kind is (`JobKind`, the `Progress` it reads from a run folder) and the registry its
  callers fill (`register`): this floor names no kind, the console and the CLI give them
  (frank.console.job_kinds);
- detached.py: launch, `python -m KIND.module RUN_ID` in its own session (stdin /dev/null, output
  appended to the run folder's job.log), so SIGHUP from a dropped SSH connection and the console's exit
  never reach it; and cancel, SIGTERM, after which the job stops cleanly after the work in flight and can
  be resumed;
- lock.py: one lock per run, an exclusive flock on the run's lock file held by the job process (the kernel
  drops it when the process dies, even by SIGKILL), so two processes never work on one run;
- job_file.py: job.json, who works on the run (kind, pid and its start time);
- state.py: status and list: running while the lock is held (or the launched pid is still starting);
  otherwise the state the run's own files say it ended in, and `interrupted` when they say nothing (killed,
  machine down);
- follow.py: `Follower.poll()` reads the status and only the bytes appended to the run's record files since
  the last poll: cheap enough for 1 Hz;
- process.py: inside the job process (`JobProcess`: the lock, SIGHUP ignored, SIGTERM a clean stop).

Each kind appends its records through frank.jsonl (fsynced, a torn last line skipped). Adding a kind: see
docs/jobs.md.
"""

from frank.jobs.detached import cancel, launch
from frank.jobs.follow import Follower
from frank.jobs.job_file import JOB_FILE, LOG_FILE, JobFile, read_job_file, write_job_file
from frank.jobs.kinds import JobError, JobKind, Progress, kind, register, registered
from frank.jobs.lock import RunLock, lock_holder
from frank.jobs.process import JobProcess, main_run_dir
from frank.jobs.state import ENDED, STATES, JobStatus, find, find_in, list_jobs, run_dirs, status, status_of

__all__ = [
    "ENDED",
    "JOB_FILE",
    "LOG_FILE",
    "STATES",
    "Follower",
    "JobError",
    "JobKind",
    "JobProcess",
    "JobStatus",
    "Progress",
    "RunLock",
    "cancel",
    "find",
    "find_in",
    "kind",
    "launch",
    "list_jobs",
    "lock_holder",
    "main_run_dir",
    "JobFile",
    "read_job_file",
    "register",
    "registered",
    "run_dirs",
    "status",
    "status_of",
    "write_job_file",
]
