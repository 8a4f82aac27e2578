"""Document consistency measured on trained taggers: CoNLL-2003 dev entity F1 of each model as
it predicts each sentence (with its document context, if it reads one), and after the rule at
each threshold (``bistack.taggers.emissions.consistency``: an entity less sure than the threshold
takes
the type the same words carry, at least that sure, elsewhere in its document).

    .venv/bin/python benchmarks/document_consistency.py NAME=MODEL_DIR [NAME=MODEL_DIR ...]

e.g. ``seed1=runs/benchmarks/stacked-conll03/context-concat4-seed1/model`` (``bash
benchmarks/stacked.sh conll03 context-concat4``: the CoNLL-2003 stacked config's runs before
it kept the rule). Each model is read with the temperature it keeps (the rule reads calibrated
probabilities) and the rule is applied by ``check_consistency``, the code ``bistack train``
runs after training; the same emissions serve every threshold. Also timed: the output math
over all of dev's emissions, tags alone (what scoring without the rule needs) against tags,
confidences and the rule. Writes benchmarks/results/document-consistency-conll03.{md,json}.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from bistack.data.tagged import read_tagged
from bistack.predictor import load_model
from bistack.taggers.emissions.calibration import check_consistency, dev_emissions

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
CHOSEN = 0.7  # the configs' threshold: fixed on seeds 1 and 2, before seed 3 was measured


def measure(name: str, model_dir: str) -> dict:
    tagger = load_model(model_dir)
    sentences = read_tagged(DEV, tagger.config.data)
    dev = dev_emissions(tagger, sentences)
    decoder = replace(tagger.decoder, consistency=0.0)
    checks = {t: check_consistency(dev, decoder, sentences, t) for t in THRESHOLDS}
    started = time.perf_counter()
    for batch in dev.batches:
        decoder.analyse(batch.emissions, batch.lengths, confidence=False)
    tags_alone = time.perf_counter() - started
    started = time.perf_counter()
    check_consistency(dev, decoder, sentences, CHOSEN)
    with_rule = time.perf_counter() - started
    return {
        "name": name,
        "model": model_dir,
        "temperature": decoder.temperature,
        "f1": checks[CHOSEN].f1_before,
        "thresholds": {str(t): check.to_json()["consistency_dev"] for t, check in checks.items()},
        "seconds": {"tags_alone": tags_alone, "with_rule": with_rule},
    }


def spread(values: list[float]) -> str:
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ± {deviation:.2f}"


def report(rows: list[dict]) -> str:
    command = " ".join(f"{r['name']}={r['model']}" for r in rows)
    lines = [
        "# Document consistency on CoNLL-2003 dev",
        "",
        f"Reproduce: `.venv/bin/python benchmarks/document_consistency.py {command}`. Entity F1 "
        "(conlleval's: span and type exact) of each model as it predicts (document context "
        "included), then after the rule at each threshold: an entity less sure than it (its "
        "calibrated probability) takes the type that the same words carry, at least that sure, "
        "elsewhere in its document. Nothing is added or removed, only types change. "
        f"The configs keep {CHOSEN}: it was fixed on seeds 1 and 2, before seed 3 was measured.",
        "",
        "| model | T | each sentence alone | "
        + " | ".join(f"rule at {t}" for t in THRESHOLDS)
        + " |",
        "|---|---:|---:|" + "---:|" * len(THRESHOLDS),
    ]
    for row in rows:
        cells = [
            f"{m['f1_after']:.2f} ({m['right_after']}/{m['retyped']})"
            for m in row["thresholds"].values()
        ]
        lines.append(
            f"| {row['name']} | {row['temperature']:.2f} | {row['f1']:.2f} | "
            + " | ".join(cells)
            + " |"
        )
    means = [spread([r["thresholds"][str(t)]["f1_after"] for r in rows]) for t in THRESHOLDS]
    lines.append(
        f"| **mean ± std** | | **{spread([r['f1'] for r in rows])}** | "
        + " | ".join(f"**{m}**" for m in means)
        + " |"
    )
    gains = [r["thresholds"][str(CHOSEN)]["f1_after"] - r["f1"] for r in rows]
    lines += [
        "",
        "In brackets: entities retyped right (a gold entity after) / entities retyped. "
        f"Gain at {CHOSEN} per model: "
        + ", ".join(f"{r['name']} {g:+.2f}" for r, g in zip(rows, gains, strict=True))
        + ".",
        "",
        f"| model | ECE of the entity confidences on dev, each sentence alone | after the rule "
        f"at {CHOSEN} | output math over dev, tags alone (s) | tags, confidences and the rule "
        "(s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        seconds, chosen = row["seconds"], row["thresholds"][str(CHOSEN)]
        lines.append(
            f"| {row['name']} | {chosen['ece_before']:.4f} | {chosen['ece_after']:.4f} | "
            f"{seconds['tags_alone']:.2f} | {seconds['with_rule']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(arguments: list[str]) -> None:
    if not arguments or any("=" not in a for a in arguments):
        raise SystemExit(__doc__)
    if not DEV.exists():
        raise SystemExit(f"{DEV} is missing: this benchmark needs ../shared/data/conll2003")
    rows = [measure(*argument.split("=", 1)) for argument in arguments]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "document-consistency-conll03.json").write_text(json.dumps(rows, indent=2) + "\n")
    (RESULTS / "document-consistency-conll03.md").write_text(report(rows))
    print(report(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
