"""The help screen: every key the console knows, with its binding id (remap it in console.toml), and a legend
of the figures the screens show: what each is, whether it is a total or a mean, and why one reads "–"."""

from __future__ import annotations

from collections.abc import Callable

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static

# (figure, what it is). Per request: the server's own value for that request; per draw (replays): the total
# over the draw's requests; on the dashboard: the mean over the last sampling window (about 10 s).
LEGEND: tuple[tuple[str, str], ...] = (
    (
        "verify step",
        "mean time of one decode step: the model checks the draft tokens and adds one of its own (a step "
        "without a draft counts as one). Dashboard: over the last window; replays: a draw's mean. "
        "–: no decode step ran (nothing decoded yet, or a front-end replay, which asks one token)",
    ),
    (
        "accept len",
        "acceptance length: mean tokens one verify step yields, the accepted draft tokens plus the model's "
        "own (1 = no draft accepted). –: no draft was proposed in the window (ngram drafts only where the "
        "text repeats), or the engine exports no acceptance (no speculative decoding)",
    ),
    (
        "by position",
        "share of drafted steps that accepted draft token 1, 2, 3, …; dimmed: the last window that had "
        "drafts (none this window)",
    ),
    ("tokens/s", "tokens generated per second over the window (all requests)"),
    ("TTFT", "time to first token, on the server: queue + prefill + front end. A draw's figure is its total"),
    ("queue", "time a request waited for the scheduler. A draw's figure is its total"),
    ("prefill", "time computing the prompt's tokens not in the prefix cache. A draw's figure is its total"),
    (
        "front end",
        "TTFT - queue - prefill: the path before the engine computes (chat template, tokenizing, the "
        "region cache). A draw's figure is its total; the seed's front-end measure",
    ),
    ("tokens", "the request's prompt tokens"),
    (
        "cache",
        "the region cache's state a request was served with: → it flipped before the request, ⇄ while it "
        "ran. A draw that spans a flip says so in its totals",
    ),
    ("done", "a job's requests (or cells, episodes) recorded so far / planned"),
    (
        "GPU",
        'NVML\'s readings; "no NVIDIA driver on this machine": NVML is not installed (a CPU-only machine)',
    ),
    (
        "cpu wait",
        "the CPU experts' wait a verify step: the expert pool's threads' busy share over the window, over its "
        "steps (an upper bound on exllamav3, whose workers spin between jobs)",
    ),
    (
        "cpu compute",
        "exllamav3's CPU pool's compute a verify step, from its EXL3_MOE_CPU_PROF lines (at most: a layer "
        "whose step picked no CPU expert runs none)",
    ),
    ("gpu stall", "the GPU's wait a verify step for the CPU's experts (EXL3_SPLIT_PROF); GPU idle: its share"),
    (
        "cpu pool",
        "exllamav3's CPU worker over its last 64 jobs (EXL3_MOE_HANDOFF_PROF): busy = compute over its time; "
        "waits on GPU = its spin for a job's inputs. Near 100% busy: the pool is the bottleneck",
    ),
    ("placement", "exllamav3's hot/cold experts: settled after 1024 decode steps with no swap"),
    ("–", "not measured (yet), or not exported by this engine: never a zero"),
)


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96; max-width: 98%; height: 90%; border: thick $primary; background: $panel; padding: 0 2;
    }
    HelpScreen .legend { padding: 0 0 1 2; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "app.pop_screen", "close", id="help.close")]

    def __init__(
        self,
        sections: list[tuple[str, list[tuple[str, str, str]]]],
        config_path: str,
        key_display: Callable[[Binding], str] | None = None,
    ) -> None:
        super().__init__()
        self.sections = sections
        self.config_path = config_path
        self.key_display = key_display

    def keys(self, key: str) -> str:
        """A binding's keys as the footer shows them ("? f1", not "question_mark,f1")."""
        shown = key.replace(",", " ").split()
        if self.key_display is not None:
            shown = [self.key_display(Binding(k, "")) for k in shown]
        return " ".join(shown)

    def compose(self) -> ComposeResult:
        lines = ["[bold]frank console keys[/]  [$frank-idle](escape closes; scroll for the legend)[/]", ""]
        for title, rows in self.sections:
            lines.append(f"[bold $primary]{escape(title)}[/]")
            for key, description, binding_id in rows:
                lines.append(
                    f"  [bold]{escape(self.keys(key)):<10}[/] {escape(description):<26} "
                    f"[$frank-idle]{escape(binding_id)}[/]"
                )
            lines.append("")
        lines.append(escape('Remap a key: add  "BINDING-ID" = "KEY"  under [keymap] in'))
        lines.append(f"[$frank-idle]{escape(self.config_path)}[/]")
        lines.append("[$frank-idle]ctrl+p opens the command palette: every action is there.[/]")
        lines.append("")
        lines.append("[bold $primary]what the figures mean[/]")
        legend = Table.grid(padding=(0, 2))
        legend.add_column(no_wrap=True, style="bold")
        legend.add_column()
        for figure, meaning in LEGEND:
            legend.add_row(figure, meaning)
        with VerticalScroll():
            yield Static("\n".join(lines))
            yield Static(legend, id="legend", classes="legend")
