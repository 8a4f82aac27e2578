"""The stacked-features table: the dev score of each model over its seeds (entity F1 for taggers,
accuracy for SST-2), what an epoch costs, and, for taggers, how each does on dev entities never
seen in training.

Run:  .venv/bin/python benchmarks/stacked_report.py conll03|wnut16|sst2
after ``bash benchmarks/stacked.sh DATA`` (runs in runs/benchmarks/stacked-DATA/MODEL-seedN).
Writes benchmarks/results/stacked-DATA.{md,json}; a model with no runs here keeps its row from
the committed JSON, marked as an earlier run. A gap between two models counts as real when
it exceeds the ladder's noise rule, 2·sqrt(s_a²/n_a + s_b²/n_b).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
from pathlib import Path

from bistack import predictor
from bistack.schemes import spans_from_tags
from bistack.taggers.layer_recipe import cached_word_states
from bistack.taggers.recipe import load_tagging_data

MODELS = {
    "scratch": "from scratch: words, chars, casing (the recurrent tagger)",
    "states": "MiniLM word states only",
    "stacked": "stacked: MiniLM word states + words, chars, casing",
    "stacked-dropout": "stacked, each part dropped per token (0.2 transformer/words/chars)",
    "stacked-context": "stacked, each sentence read with 64 subwords a side of its document",
    "stacked-finetune": "stacked, MiniLM fine-tuned (lr 5e-5, layer-wise decay 0.9)",
    "context-mean": "stacked with context, a word's state the mean of its subwords'",
    "context-lstm-mix": "the subword mean, each word's layers mixed by a BiLSTM over them",
    "context-concat4": "the subword mean, its last 4 layers side by side (not mixed)",
    "context-2-layers": "the subword mean, a second BiLSTM layer",
    "context-128": "the subword mean, 128 subwords a side (windows of 256)",
    "context-80-epochs": "the subword mean, a budget of 80 epochs (not 40)",
    "context-char-50": "the subword mean, a char BiLSTM of 50 a direction (not 25)",
    "concat4-lr-half": "the last 4 layers side by side, a learning rate of 0.001 (not 0.002)",
    "concat4-char-50": "the last 4 layers side by side, a char BiLSTM of 50 a direction",
    "concat4-context-128": "the last 4 layers side by side, 128 subwords a side (windows of 256)",
    "concat4-longer": "the last 4 layers side by side, 80 epochs and a patience of 16",
    "concat4-wide": "the last 4 layers side by side, a BiLSTM of 400 a direction (not 200)",
    "concat4-2-layers": "the last 4 layers side by side, a second BiLSTM layer",
    "concat4-average": "the last 4 layers side by side, a moving average of the weights kept",
    "concat4-batch-16": "the last 4 layers side by side, batches of 16 sentences (not 32)",
    "concat-all": "all 6 layers side by side (not the last 4)",
    "concat4-lr-up": "the last 4 layers side by side, a learning rate of 0.003 (not 0.002)",
    "concat4-dropout-0.6": "the last 4 layers side by side, dropout 0.6 (not 0.5)",
    "concat4-no-words": "the last 4 layers side by side, no word embedding (chars and casing kept)",
    "average-patience-16": "the moving average of the weights, a patience of 16 (not 8)",
    "consistency": "the config as it ships: the last 4 layers side by side, document consistency",
}
TEXT_MODELS = {
    "scratch": "from scratch: BiLSTM + additive attention over words",
    "states": "MiniLM layers only: BiLSTM over per-layer means",
    "stacked": "stacked: MiniLM layers' pooled vector + the BiLSTM-attention's",
    "stacked-dropout": "stacked, each part dropped (0.2 per text for the layers, per token words)",
}
RESULTS = Path(__file__).resolve().parent / "results"
CACHE_LINE = re.compile(r"word states of (\d+) sentences computed and cached in (\d+) s")


def run_summary(run: Path, column: str) -> dict:
    """Best dev score, its epoch, the epochs run, seconds per epoch (the median), and the
    cache's build time (taggers' word states; the log says it). A tagger that keeps document
    consistency scores as it predicts: dev F1 after the rule (what training measured after
    it), its best epoch's own beside it."""
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    seconds = [float(r["seconds"]) for r in rows]  # since the run started, at each epoch's end
    best = max(rows, key=lambda r: float(r[column]))
    log = run.with_name(run.name + ".log")
    cache = [int(s) for _, s in CACHE_LINE.findall(log.read_text())] if log.exists() else []
    kept = json.loads((run / "model" / "config.json").read_text()).get("calibration") or {}
    rule = kept.get("consistency_dev")
    return {
        "score": rule["f1_after"] if rule else float(best[column]),
        **({"score_each_sentence_alone": float(best[column])} if rule else {}),
        "best_epoch": int(best["epoch"]),
        "epochs": len(rows),
        # The median epoch: a run paused or crowded for a while does not move it.
        "seconds_per_epoch": statistics.median(
            b - a for a, b in zip([0.0, *seconds], seconds, strict=False)
        ),
        "cache_build_seconds": sum(cache) if cache else None,
    }


def entity_surfaces(sentences) -> set[tuple[str, str]]:
    """Every (entity text, type) of ``sentences``' gold tags."""
    found = set()
    for sentence in sentences:
        for span in spans_from_tags(sentence.tags):
            found.add((" ".join(sentence.tokens[span.start : span.end]), span.label))
    return found


def unseen_recall(run: Path) -> dict:
    """Recall on dev entities whose text never occurs as an entity in training, beside recall
    on the rest (names a model may have memorised)."""
    model = predictor.load_model(run / "model")
    data = load_tagging_data(model.config)
    known = {text for text, _ in entity_surfaces(data.train)}
    documents = [s.document for s in data.dev]  # for a tagger that reads document context
    tokens = [s.tokens for s in data.dev]
    if model.config.kind == "layer_tagger" and not model.config.backbone.finetune:
        # The frozen backbone's word states from the feature cache its training filled (the
        # ones its dev scores came from), not a second pass of the transformer over dev.
        states = cached_word_states(model.backbone, model.config, data.dev, print)
        predicted = model.tag_tokens(tokens, documents=documents, states=states)
    else:
        predicted = model.tag_tokens(tokens, documents=documents)
    counts = {"seen": [0, 0], "unseen": [0, 0]}  # [found, gold]
    for sentence, tags in zip(data.dev, predicted, strict=True):
        guessed = set(spans_from_tags(tags))
        for span in spans_from_tags(sentence.tags):
            text = " ".join(sentence.tokens[span.start : span.end])
            bucket = counts["seen" if text in known else "unseen"]
            bucket[0] += span in guessed
            bucket[1] += 1
    return {
        f"{name}_recall": 100.0 * found / gold if gold else math.nan
        for name, (found, gold) in counts.items()
    } | {"unseen_entities": counts["unseen"][1], "seen_entities": counts["seen"][1]}


def calibration(run: Path) -> dict:
    """The entity-confidence temperature ``bistack train`` fitted, and its held-out ECE (fitted
    on one half of dev, measured on the other, both ways), when the run kept one."""
    kept = json.loads((run / "model" / "config.json").read_text()).get("calibration")
    if not kept:
        return {}
    held_out = kept["held_out"]
    return {
        "temperature": kept["temperature"],
        "held_out_ece_before": sum(h["ece_before"] for h in held_out) / len(held_out),
        "held_out_ece_after": sum(h["ece_after"] for h in held_out) / len(held_out),
    }


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("data", choices=["conll03", "wnut16", "sst2"])
    parser.add_argument(
        "--epochs", type=int, help="the runs of EPOCHS=N bash benchmarks/stacked.sh"
    )
    args = parser.parse_args()
    name = f"{args.data}-e{args.epochs}" if args.epochs else args.data
    tagging = args.data != "sst2"
    models, column = (MODELS, "dev_f1") if tagging else (TEXT_MODELS, "dev_accuracy")
    keys = ["score", "seconds_per_epoch"] + (["seen_recall", "unseen_recall"] if tagging else [])
    base = Path("runs/benchmarks") / f"stacked-{name}"
    kept = RESULTS / f"stacked-{name}.json"
    earlier = json.loads(kept.read_text()) if kept.exists() else {}
    table: dict[str, dict] = {}
    for model, description in models.items():
        runs = sorted(
            p
            for p in base.glob(f"{model}-seed*")
            if p.is_dir()
            and (p / "model" / "model.safetensors").exists()
            and not (p / "checkpoint.safetensors").exists()
        )
        if not runs:  # a model not rerun keeps its committed row, marked as such
            if model in earlier:
                table[model] = earlier[model] | {"earlier": True}
            continue
        per_seed = [
            run_summary(r, column)
            | (unseen_recall(r) | calibration(r) if tagging else {})
            | {"run": r.name}
            for r in runs
        ]
        table[model] = {"description": description, "seeds": per_seed}
        for key in keys:
            mean, std = mean_std([s[key] for s in per_seed])
            table[model][key] = {"mean": mean, "std": std}
    RESULTS.mkdir(exist_ok=True)
    kept.write_text(json.dumps(table, indent=2) + "\n")
    (RESULTS / f"stacked-{name}.md").write_text(markdown(args.data, table, tagging, args.epochs))
    print(markdown(args.data, table, tagging, args.epochs))


def markdown(data: str, table: dict[str, dict], tagging: bool, epochs: int | None = None) -> str:
    metric = "entity-level micro F1 as conlleval scores it" if tagging else "accuracy"
    recall = " recall, entities seen in train | recall, unseen |" if tagging else ""
    # One command per set of seeds, so a one-seed screen is not rerun with three.
    by_seeds: dict[tuple[int, ...], list[str]] = {}
    for name, row in table.items():
        if not row.get("earlier"):
            seeds = tuple(sorted(int(s["run"].rpartition("seed")[2]) for s in row["seeds"]))
            by_seeds.setdefault(seeds, []).append(name)
    runs = " && ".join(
        (f"EPOCHS={epochs} " if epochs else "")
        + f"OMP_NUM_THREADS=1 bash benchmarks/stacked.sh {data} {' '.join(names)}"
        + ("" if seeds == (1, 2, 3) else " -- " + " ".join(map(str, seeds)))
        for seeds, names in by_seeds.items()
    )
    lines = [
        f"# Stacked features, {data} dev ({metric})",
        "",
        f"Reproduce: `{runs}` then "
        f"`.venv/bin/python benchmarks/stacked_report.py {data}"
        + (f" --epochs {epochs}`" if epochs else "`")
        + (
            f"; every run at a budget of {epochs} epochs (the configs' own is 40)."
            if epochs
            else "."
        ),
        "",
        f"| model | seeds | dev score (mean ± std) | per seed (best epoch) |{recall}"
        " s / epoch (median) | cache build |",
        "|---|---:|---:|---|" + ("---:|---:|" if tagging else "") + "---:|---:|",
    ]
    for row in table.values():
        seeds = row["seeds"]
        caches = [s["cache_build_seconds"] for s in seeds if s["cache_build_seconds"]]
        recalls = (
            f" {row['seen_recall']['mean']:.2f} | {row['unseen_recall']['mean']:.2f} |"
            if tagging
            else ""
        )
        lines.append(
            f"| {row['description']}{' (an earlier run)' if row.get('earlier') else ''} | "
            f"{len(seeds)} | {row['score']['mean']:.2f} ± "
            f"{row['score']['std']:.2f} | "
            + ", ".join(f"{s['score']:.2f} ({s['best_epoch']})" for s in seeds)
            + f" |{recalls} {row['seconds_per_epoch']['mean']:.0f} | "
            + (f"{max(caches)} s" if caches else "-")
            + " |"
        )
    if seeds_of := {n: r["seeds"] for n, r in table.items()}:
        lines += [
            "",
            "| comparison | gain | gain on the seeds both ran | noise (2·sqrt(s_a²/n + s_b²/n))"
            " | real? |",
            "|---|---:|---:|---:|---|",
        ]
        pairs = [("scratch", "stacked"), ("states", "stacked"), ("stacked", "stacked-dropout"),
                 ("stacked", "stacked-context"), ("stacked", "stacked-finetune")]  # fmt: skip
        pairs.append(("stacked-context", "context-mean"))
        steps = [m for m in MODELS if m.startswith("context-") and m != "context-mean"]
        pairs += [("context-mean", m) for m in steps]  # one change each past the config
        past_concat4 = [m for m in MODELS if m.startswith("concat4-") or m == "concat-all"]
        pairs += [("context-concat4", m) for m in past_concat4]
        pairs.append(("concat4-average", "average-patience-16"))
        pairs.append(("context-concat4", "consistency"))
        for a, b in pairs:
            if a in seeds_of and b in seeds_of:
                (ma, sa), (mb, sb) = (mean_std([s["score"] for s in seeds_of[m]]) for m in (a, b))
                gain = mb - ma
                # A one-seed screen read against the same seed of the model it changes: the
                # seed fixes the initialisation and the batch order, so this gap is the change's.
                by_seed = [{s["run"].rpartition("seed")[2]: s["score"] for s in seeds_of[m]}
                           for m in (a, b)]  # fmt: skip
                shared = sorted(by_seed[0].keys() & by_seed[1].keys())
                paired = (
                    f"{statistics.mean(by_seed[1][n] - by_seed[0][n] for n in shared):+.2f}"
                    f" (seed{'s' if len(shared) > 1 else ''} {', '.join(shared)})"
                    if shared
                    else "-"
                )
                if min(len(seeds_of[a]), len(seeds_of[b])) < 2:  # one seed has no spread
                    lines.append(
                        f"| {a} -> {b} | {gain:+.2f} | {paired} | unknown (one seed) | not known |"
                    )
                    continue
                noise = 2 * math.sqrt(sa**2 / len(seeds_of[a]) + sb**2 / len(seeds_of[b]))
                lines.append(
                    f"| {a} -> {b} | {gain:+.2f} | {paired} | {noise:.2f} | "
                    f"{'yes' if abs(gain) > noise else 'no'} |"
                )
    calibrated = [
        (r["description"], s) for r in table.values() for s in r["seeds"] if "temperature" in s
    ]
    if calibrated:
        lines += [
            "",
            "Entity confidences: the temperature `bistack train` fitted on dev, and the expected "
            "calibration error held out (fitted on one half of dev, measured on the other, both "
            "ways, mean).",
            "",
            "| model | run | temperature | held-out ECE before | after |",
            "|---|---|---:|---:|---:|",
        ]
        for description, s in calibrated:
            lines.append(
                f"| {description} | {s['run']} | {s['temperature']:.3f} | "
                f"{s['held_out_ece_before']:.4f} | {s['held_out_ece_after']:.4f} |"
            )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
