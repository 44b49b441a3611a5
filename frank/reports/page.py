"""One self-contained HTML page: inline CSS, inline SVG plots, no script and no external resource, so a
report can be mailed, archived or opened offline. Experiment reports use it (experiments/html.py); episode
and fidelity reports build their pages the same way.

    page = Page("title", "subtitle")
    page.facts([("design sha256", sha)]); page.table(headers, rows); page.figure(svg, "caption")
    page.decision("confirmed", "why"); html = page.render()
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from frank.paths import write_private

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232b; background: #fff;
       max-width: 980px; margin: 2em auto; padding: 0 1.2em; }
h1 { font-size: 1.5em; margin-bottom: .1em; } h2 { font-size: 1.15em; margin-top: 1.8em;
     border-bottom: 1px solid #d7dce2; padding-bottom: .2em; }
.subtitle { color: #56606b; margin-top: 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1.2em; }
dl.facts dt { color: #56606b; } dl.facts dd { margin: 0; font-family: ui-monospace, monospace; word-break: break-all; }
table { border-collapse: collapse; margin: .6em 0; } caption { text-align: left; color: #56606b; padding: .2em 0; }
th, td { border: 1px solid #d7dce2; padding: .25em .6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } th { background: #f2f4f7; }
figure { margin: 1em 0; } figcaption { color: #56606b; font-size: .92em; } figure svg { max-width: 100%; height: auto; }
.decision { padding: .8em 1em; border-radius: 6px; margin: 1em 0; border: 1px solid; }
.decision.confirmed { background: #e9f7ef; border-color: #3c9a5f; }
.decision.not-confirmed, .decision.incomplete { background: #fdf0ee; border-color: #c0504d; }
.decision .verdict { font-weight: 700; text-transform: uppercase; letter-spacing: .04em; }
.note { color: #56606b; } footer { margin-top: 2.5em; color: #8a939d; font-size: .85em; }
"""


class Page:
    def __init__(self, title: str, subtitle: str = "") -> None:
        self.title = title
        self.parts: list[str] = [f"<h1>{html.escape(title)}</h1>"]
        if subtitle:
            self.parts.append(f'<p class="subtitle">{html.escape(subtitle)}</p>')

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def paragraph(self, text: str, css: str = "") -> None:
        cls = f' class="{css}"' if css else ""
        self.parts.append(f"<p{cls}>{html.escape(text)}</p>")

    def facts(self, pairs: Iterable[tuple[str, Any]], element_id: str = "") -> None:
        ident = f' id="{element_id}"' if element_id else ""
        items = "".join(f"<dt>{html.escape(str(k))}</dt><dd>{html.escape(_text(v))}</dd>" for k, v in pairs)
        self.parts.append(f'<dl class="facts"{ident}>{items}</dl>')

    def table(self, headers: list[str], rows: Iterable[Iterable[Any]], caption: str = "", element_id: str = "") -> None:
        ident = f' id="{element_id}"' if element_id else ""
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows)
        cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
        self.parts.append(f"<table{ident}>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")

    def figure(self, svg: str, caption: str, element_id: str = "") -> None:
        ident = f' id="{element_id}"' if element_id else ""
        self.parts.append(f"<figure{ident}>{svg}<figcaption>{html.escape(caption)}</figcaption></figure>")

    def decision(self, verdict: str, reason: str, rule: str = "") -> None:
        css = verdict.replace(" ", "-")
        rule_html = f'<div class="note">rule: {html.escape(rule)}</div>' if rule else ""
        self.parts.append(
            f'<div class="decision {html.escape(css)}" id="decision"><span class="verdict">'
            f"{html.escape(verdict)}</span>: {html.escape(reason)}{rule_html}</div>"
        )

    def render(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head><body>"
            + "\n".join(self.parts)
            + f"<footer>written by frank at {stamp}</footer></body></html>\n"
        )


def write_page(path: Path, text: str) -> None:
    """Write a page (0600, like every result of a run), creating its folder."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, text)


def _cell(value: Any) -> str:
    numeric = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        or isinstance(value, str)
        and value[:1] in "+-0123456789"
        and value.lstrip("+-").replace(".", "", 1).isdigit()
    )
    return f'<td class="num">{html.escape(_text(value))}</td>' if numeric else f"<td>{html.escape(_text(value))}</td>"


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
