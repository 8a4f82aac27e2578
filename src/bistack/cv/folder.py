"""What a cross-validation's output folder may hold, at every depth, and how a finished one is
replaced: never by deleting a file bistack did not write, and only once the new one exists.

A CV writes its files at the top (``cv.json``, ``oof.*``...), a training run per fold under
``folds/`` (each with its model, metrics and TensorBoard curves), the ensemble under ``model/``
and a report under ``cv_report/``. The claim (``bistack.files.claim``) walks the folder with
that layout and names every entry bistack does not write there: a rerun refuses to touch a
folder it would replace holding one, and ``--overwrite`` refuses an output holding one
anywhere. With ``--overwrite`` the new CV runs in a staging folder beside the output
(``.NAME.bistack-overwrite``, resumed by the same command after a kill) and is swapped in whole when
it has finished, so a command that fails, or is killed, leaves the finished CV as it was.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from bistack.files.claim import Layout
from bistack.files.claim import refuse_foreign as refuse_foreign_files
from bistack.files.ensemble_dir import ensemble_layout
from bistack.files.leftovers import leftover_name, leftover_of
from bistack.files.modeldir import model_layout
from bistack.files.swap import exchange, restore_parked
from bistack.reports.layout import report_layout

FOLDS_FILE, SETTINGS_FILE, FOLD_FILE = "folds.json", "cv-settings.json", "fold.json"
RESULT_FILE, REPORT_DIR, MODEL_DIR = "cv.json", "cv_report", "model"
LOG_FILE = "cv.log"  # every line the CV said, on a terminal or not
FOLD_NAME = re.compile(r"(repeat\d+-)?fold\d+|seed\d+")  # seed<N>: a dev split's repeats
FOLDS_DIR = "folds"  # each fold's run, in a folder of its name
RUN_FILES = ("metrics.csv", "dev_metrics.json", "checkpoint.safetensors", "fold.json", "train.log")


def fold_dir(output: Path, name: str) -> Path:
    """Where the CV in ``output`` trains its fold ``name`` (``fold0``, ``repeat2-fold1``,
    ``seed1``): that fold's run folder."""
    return output / FOLDS_DIR / name


def cv_files(oof_files: tuple[str, ...]) -> tuple[str, ...]:
    """Everything a CV writes at the top of its output, with a kind's ``oof_files`` (the
    settings first: what claims a folder as a CV's)."""
    top = (SETTINGS_FILE, FOLDS_FILE, FOLDS_DIR, *oof_files, RESULT_FILE, REPORT_DIR, MODEL_DIR)
    return (*top, LOG_FILE)


def staged(name: str, written: tuple[str, ...] | None = None) -> bool:
    """Whether ``name`` is what bistack leaves beside an entry of ``written`` (or a fold's
    run) while writing it: a temporary file, a staging folder, a lock (see
    ``bistack.files.leftovers``)."""
    entry = leftover_of(name)
    return entry is not None and (
        written is None or entry in written or FOLD_NAME.fullmatch(entry) is not None
    )


def run_layout(kept: tuple[str, ...]) -> Layout:
    """A fold's training run: its model, metrics, curves and ``fold.json``, with what the
    kind ``kept`` of its held-out pass."""

    def layout(name: str) -> Layout | bool:
        if name == "model":
            return model_layout
        if name == "tensorboard":
            return lambda entry: entry.startswith("events.out.tfevents.") or staged(entry)
        return name in RUN_FILES or name in kept or staged(name)

    return layout


def folds_layout(kept: tuple[str, ...]) -> Layout:
    def layout(name: str) -> Layout | bool:
        if FOLD_NAME.fullmatch(name):
            return run_layout(kept)
        return staged(name)

    return layout


def cv_layout(
    output: Path, top: tuple[str, ...], whole: bool, kept: tuple[str, ...] = ()
) -> Layout:
    """The layout of the CV folder ``output``, ``top`` being the files a CV writes there and
    ``kept`` those it writes in each fold's folder beside its run; ``whole``: the folder is to
    be replaced whole, so an entry of the user's at the top counts too (else it is left). Its
    report's charts are those its ``report.json`` lists."""

    def layout(name: str) -> Layout | bool | None:
        if name == "folds":
            return folds_layout(kept)
        if name == "model":
            return ensemble_layout()
        if name == REPORT_DIR:
            return report_layout(output / REPORT_DIR)
        return True if name in top or staged(name, top) else None if not whole else False

    return layout


def refuse_foreign(
    output: Path, top: tuple[str, ...], whole: bool, kept: tuple[str, ...] = ()
) -> None:
    """Refuse, naming them, files bistack did not write where the CV would replace them
    (``top`` and ``kept``: as for :func:`cv_layout`)."""
    refuse_foreign_files(
        output,
        cv_layout(output, top, whole, kept),
        "--output",
        "--overwrite replaces the whole folder and never deletes them"
        if whole
        else "this cross-validation replaces the folders holding them, and never deletes them",
    )


def overwrite_staging(output: Path, settings_file: str, record: dict) -> Path:
    """The folder a CV replacing ``output`` runs in: one a killed run of the same CV left (to
    go on from its first unfinished fold), else a new one (one of another CV cleared: it is
    bistack's own)."""
    staging = output.parent / leftover_name(output.name, "overwrite")
    written = staging / settings_file
    if staging.exists():  # compared as JSON reads it back (tuples as lists)
        same = written.is_file() and json.loads(written.read_text()) == json.loads(
            json.dumps(record)
        )
        if not same:
            shutil.rmtree(staging)
    return staging


def swap_in(staging: Path, output: Path) -> None:
    """``staging`` (a finished CV) and ``output`` swapped in one atomic exchange (a reader, or
    a kill, finds the old CV or the new one there, never neither), then the old one deleted."""
    restore_parked(output)
    exchange(staging, output)
    shutil.rmtree(staging)
