"""The report's one HTML file: self-contained (its style inline, its charts the PNGs beside
it), no script and no request beyond its own folder, every text escaped."""

from __future__ import annotations

import html
import json
from typing import Any

STYLE = """
body { font: 14px/1.5 system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; }
img { max-width: 100%; display: block; margin: 0.5em 0; }
pre { background: #f6f6f6; padding: 0.5em; white-space: pre-wrap; }
.entity { padding: 0 2px; border-radius: 3px; }
.gold { background: #e3e3f3; } .predicted { background: #d9e8f7; }
.predicted.right { background: #cdeccd; } .predicted.wrong { background: #f6c9c9; }
.conf { font-size: 0.7em; color: #555; margin-left: 2px; }
.headline { display: flex; gap: 2em; margin: 0.5em 0 1em; }
.figure { font-size: 2em; font-weight: bold; } .figure-name { color: #666; }
.type { font-size: 0.7em; font-weight: bold; margin-left: 2px; color: #555; }
.item { margin: 0.6em 0; padding: 0.3em 0.6em; border-left: 3px solid #ccc; }
.where { color: #777; font-size: 0.85em; }
"""


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else escape(value)


def table(spec: dict[str, Any]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in spec["columns"])
    rows = "".join(
        "<tr>" + "".join(f"<td>{number(v)}</td>" for v in row) + "</tr>" for row in spec["rows"]
    )
    return f"<h3>{escape(spec['title'])}</h3><table><tr>{head}</tr>{rows}</table>"


def segments(parts: list[dict[str, Any]], kind: str) -> str:
    """Text with entities marked (``type``, ``confidence``) or tokens shaded (``weight``)."""
    out = []
    for part in parts:
        text = escape(part["text"])
        if "type" in part:
            right = part.get("right")  # True, False, or None: not judged
            judged = "" if right is None else (" right" if right else " wrong")
            verdict = {" right": " · right", " wrong": " · wrong"}.get(judged, "")
            title = part["type"] + verdict
            shown = (
                f'<span class="conf">{part["confidence"]:.2f}</span>'
                if "confidence" in part
                else ""
            )
            out.append(
                f'<span class="entity {kind}{judged}" title="{escape(title)}">{text}'
                f'<span class="type">{escape(part["type"])}</span>{shown}</span>'
            )
        elif "weight" in part:
            alpha = max(0.0, min(1.0, float(part["weight"])))
            out.append(f'<span style="background: rgba(220, 60, 30, {alpha:.2f})">{text}</span>')
        else:
            out.append(text)
    return "".join(out)


def item(entry: dict[str, Any]) -> str:
    lines = [f'<div class="item"><div class="where">{escape(entry.get("where", ""))}']
    facts = {k: v for k, v in entry.items() if k not in ("where", "gold", "predicted", "text")}
    lines.append("".join(f" · {escape(k)} {number(v)}" for k, v in facts.items()) + "</div>")
    if isinstance(entry.get("gold"), list):  # a tagger's sentence, entities marked
        lines.append(f"<div>gold: {segments(entry['gold'], 'gold')}</div>")
        lines.append(f"<div>predicted: {segments(entry['predicted'], 'predicted')}</div>")
    else:
        if "gold" in entry:
            lines.append(
                f"<div>gold {number(entry['gold'])}, predicted {number(entry['predicted'])}</div>"
            )
        lines.append(f"<div>{segments(entry.get('text', []), 'text')}</div>")
    return "".join(lines) + "</div>"


def headline(data: dict[str, Any]) -> str:
    """The section's headline figures, big, first: those its family names (``headline``), or
    every single number among its scores."""
    figures = data.get("headline") or [
        {"name": name.replace("_", " "), "value": value}
        for name, value in data.get("scores", {}).items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]
    cells = [
        f'<div><div class="figure">{number(f["value"])}</div>'
        f'<div class="figure-name">{escape(f["name"])}</div></div>'
        for f in figures
    ]
    return f'<div class="headline">{"".join(cells)}</div>' if cells else ""


def section(number_: int, data: dict[str, Any], images: list[str]) -> str:
    parts = [f'<section id="section-{number_}"><h2>{escape(data["data"])}</h2>']
    parts.append(headline(data))
    parts.append(f"<pre>{escape(data['summary'])}</pre>")
    parts += [f"<p>{escape(note)}</p>" for note in data.get("notes", [])]
    parts += [table(t) for t in data.get("tables", [])]
    for image, spec in zip(images, data.get("figures", []), strict=True):
        parts.append(f'<img src="{escape(image)}" alt="{escape(spec["title"])}">')
    for group in data.get("examples", []):
        parts.append(f"<h3>{escape(group['title'])}</h3>")
        parts += [item(entry) for entry in group["items"]] or ["<p>none</p>"]
    return "".join(parts) + "</section>"


def page(title: str, sections: list[dict[str, Any]], images: list[list[str]]) -> str:
    body = "".join(
        section(i, s, imgs) for i, (s, imgs) in enumerate(zip(sections, images, strict=True))
    )
    meta = escape(json.dumps({"sections": len(sections)}))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        # Nothing but this folder: no script, no other origin.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "img-src 'self' file:; style-src 'unsafe-inline'\">"
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f'<body data-report="{meta}"><h1>{escape(title)}</h1>{body}</body></html>'
    )
