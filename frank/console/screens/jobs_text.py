"""How a job reads on screen: its title, its per-draw totals and the dashboard's one-line progress."""

from __future__ import annotations

import re

from textual.markup import escape

from frank.console.state import FollowedJob
from frank.console.widgets.fmt import secs
from frank.jobs import JobStatus
from frank.workloads.record import KnobFlip


def job_title(st: JobStatus) -> str:
    extra = st.extra or {}
    if st.kind == "replay" and extra.get("workload"):
        return f"replay {extra['workload']} · {extra.get('mode')}"
    return st.kind


RUN_ID = re.compile(r"^\d{2}(\d{2})(\d{2})(\d{2})-(\d{2})(\d{2})\d{2}-(.+?)(?:-[0-9a-f]{4,6})?$")


def job_cells(j: JobStatus) -> tuple[str, str, str, str]:
    """A job's row in the jobs table: (state, done, started, job): the run id's date and time, then its kind
    and name (the followed job's head shows the whole run id)."""
    found = RUN_ID.match(j.run_id)
    if found:
        _, month, day, hour, minute, name = found.groups()
        started = f"{month}-{day} {hour}:{minute}"
    else:
        started, name = "–", j.run_id
    return (j.state, f"{j.done}/{j.planned or '?'}", started, f"{j.kind} {name}")


def totals_text(st: JobStatus) -> str:
    """Each draw's totals: what ran, the sums over its requests (the server's times), the means, and where a
    live knob flipped within it."""
    lines = []
    for draw, t in ((st.extra or {}).get("draws") or {}).items():
        flips = [KnobFlip.from_json(f) for f in t.get("knob_flips") or () if isinstance(f, dict)]
        head = f"[bold]{escape(draw)}[/] {t.get('ok')}/{t.get('planned')} ok · {t.get('failed')} failed"
        lines.append(head + (" · [bold $frank-warn]spans a flip[/]" if flips else ""))
        lines.extend(f"  [$frank-warn]{escape(f.describe())}[/]" for f in flips)
        # lines short enough for the replays screen's right half at 120 columns: a label never parts from
        # its figure
        lines.append(
            f"  [$frank-idle]total[/] TTFT {secs(t.get('ttft_s'))} · prefill {secs(t.get('prefill_s'))} · "
            f"queue {secs(t.get('queue_s'))}"
        )
        line = f"  [$frank-idle]total[/] front end {secs(t.get('front_end_s'))}"
        if t.get("verify_step_s"):
            line += f" · [$frank-idle]mean[/] verify step {secs(t['verify_step_s'])}"
        lines.append(line)
        if t.get("acceptance_length"):
            lines.append(f"  [$frank-idle]mean[/] acceptance length {t['acceptance_length']:.2f} tokens")
    if not lines and st.detail:
        lines.append(escape(st.detail))
    return "\n".join(lines)


# (title, done, total, totals, state): what the dashboard's progress strip shows (RunProgress.show's arguments)
Progress = tuple[str | None, int, int | None, str, str]
NO_PROGRESS: Progress = (None, 0, None, "", "running")


def job_progress(job: FollowedJob) -> Progress:
    """(title, done, total, totals, state) of the followed job, for the dashboard's progress strip."""
    st = job.status
    if st is None:
        return (f"job {job.run_id}", 0, None, "", "starting")
    now = next(
        (f"draw {d} ({i}/{len(st.parts)})" for i, (d, (done, total)) in enumerate(st.parts.items(), 1) if done < total),
        "",
    )
    draws = (st.extra or {}).get("draws") or {}
    front_ends = [t.get("front_end_s") for t in draws.values()]
    fe = None if None in front_ends else sum(front_ends)  # None: the engine exports no front-end time
    failed = sum(t.get("failed") or 0 for t in draws.values())
    totals = f"{now}  front end total {secs(fe)}  failed {failed}" if st.kind == "replay" else st.detail
    return (job_title(st), st.done, st.planned, (totals or "").strip(), st.state)
