"""What a report folder holds, torch-free: ``report.json`` (the record of every section, the
charts it drew among them), ``report.html`` and a PNG per chart. A PNG is bistack's only when
the ``report.json`` beside it lists it, so a user's own picture dropped in the folder is never
taken for a chart and replaced."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bistack.files.claim import Layout, staged

REPORT_JSON, REPORT_HTML = "report.json", "report.html"


def chart_names(sections: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The PNG file of each figure, section by section: ``NUMBER-NAME.png``."""
    return [
        [f"{number}-{spec['name']}.png" for spec in section.get("figures", [])]
        for number, section in enumerate(sections)
    ]


def written_charts(folder: Path) -> frozenset[str]:
    """The charts the report in ``folder`` says it drew (none when it has no readable
    ``report.json``: then no PNG there is bistack's)."""
    try:
        record = json.loads((folder / REPORT_JSON).read_text(encoding="utf-8"))
        sections = record["sections"]
        return frozenset(name for names in chart_names(sections) for name in names)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return frozenset()


def report_layout(folder: Path) -> Layout:
    """The layout (see ``bistack.files.claim``) of the report in ``folder``: its page, its
    record and the charts that record lists, flat."""
    charts = written_charts(folder)
    return lambda name: name in (REPORT_JSON, REPORT_HTML) or name in charts or staged(name)
