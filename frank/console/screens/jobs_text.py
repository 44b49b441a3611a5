"""How a job reads on screen: its title, its per-draw totals and the dashboard's one-line progress."""

from __future__ import annotations

from textual.markup import escape

from frank.console.state import FollowedJob
from frank.console.widgets.fmt import secs
from frank.jobs import JobStatus


def job_title(st: JobStatus) -> str:
    extra = st.extra or {}
    if st.kind == "replay" and extra.get("workload"):
        return f"replay {extra['workload']} · {extra.get('mode')}"
    return st.kind


def totals_text(st: JobStatus) -> str:
    lines = []
    for draw, t in ((st.extra or {}).get("draws") or {}).items():
        lines.append(
            f"[bold]{escape(draw)}[/] {t.get('ok')}/{t.get('planned')} ok · {t.get('failed')} failed · "
            f"front-end {secs(t.get('front_end_s'))} · prefill {secs(t.get('prefill_s'))} · "
            f"queue {secs(t.get('queue_s'))} · TTFT {secs(t.get('ttft_s'))}"
            + (f" · verify step {secs(t['verify_step_s'])}" if t.get("verify_step_s") else "")
        )
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
    totals = f"{now}  front-end {secs(fe)}  failed {failed}" if st.kind == "replay" else st.detail
    return (job_title(st), st.done, st.planned, (totals or "").strip(), st.state)
