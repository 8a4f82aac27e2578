"""Write a report directory: ``report.json`` (every section's data, the scores exactly as
``evaluate --json`` gives them), a PNG per chart, and ``report.html``."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bistack.files.claim import claim_folder, output_folder
from bistack.files.paths import refuse_overlap
from bistack.files.swap import atomic_folder
from bistack.predictor import Predictor
from bistack.reports.charts import draw
from bistack.reports.layout import REPORT_HTML, REPORT_JSON, chart_names, report_layout
from bistack.reports.page import page


def scores_section(opened: Predictor, path: str | Path) -> dict[str, Any]:
    """A kind without a report of its own: its scores."""
    scores = opened.evaluate(path)
    return {"scores": scores.to_json(), "summary": str(scores), "figures": [], "notes": []}


def report_sections(opened: Predictor, data: Sequence[str]) -> list[dict[str, Any]]:
    """One section per data file, as the model's card says its report shows it."""
    builder = opened.card.report_builder
    sections = []
    for path in data:
        with opened.running():
            section = (
                builder(opened.model, path, opened.path)
                if builder
                else scores_section(opened, path)
            )
        sections.append({"data": str(path), "kind": opened.card.kind, **section})
    return sections


def write_report(
    opened: Predictor, data: Sequence[str], directory: str | Path, *, overwrite: bool = False
) -> list[dict[str, Any]]:
    """The report of ``opened`` on each of ``data`` in ``directory`` (written whole beside it,
    then renamed into place); returns its sections. An earlier report there is replaced only
    with ``overwrite``; a folder holding anything else is refused (see ``claim_folder``)."""
    directory = output_folder(directory, "--report")
    inputs: list[tuple[str, str | Path | None]] = [("the model", opened.path)]
    inputs += [(f"the data {p}", p) for p in data]
    refuse_overlap(directory, inputs, "--report")
    claim = functools.partial(
        claim_folder,
        directory,
        "--report",
        overwrite=overwrite,
        signature=REPORT_JSON,
        layout=report_layout(directory),
    )
    claim()
    sections = report_sections(opened, data)
    record = {"model": str(opened.path), "kind": opened.card.kind}
    write_pages(directory, f"{opened.description}: {opened.path}", record, sections, claim)
    return sections


def write_pages(
    directory: Path,
    title: str,
    record: dict[str, Any],
    sections: list[dict[str, Any]],
    claim: Callable[[], bool],
) -> None:
    """``report.json`` (``record`` and the sections), a PNG per figure and ``report.html``,
    written beside ``directory`` and swapped in whole (``atomic_folder``); ``claim()``, asked
    just before, raises where an earlier folder there may not be replaced."""
    with atomic_folder(directory) as staging:
        images = chart_names(sections)
        for section, names in zip(sections, images, strict=True):
            for spec, name in zip(section.get("figures", []), names, strict=True):
                draw(spec, staging / name)
        whole = {**record, "sections": sections}
        (staging / REPORT_JSON).write_text(json.dumps(whole, indent=1, allow_nan=False))
        (staging / REPORT_HTML).write_text(page(title, sections, images), encoding="utf-8")
        claim()  # checked again, just before the swap: it may have changed
