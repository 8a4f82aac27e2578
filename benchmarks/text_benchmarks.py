"""SST-2 and CommonLit: the BiLSTM + attention models against TF-IDF baselines, in one run.

SST-2: TF-IDF + logistic regression, then the BiLSTM + additive attention classifier with
``--seeds`` seeds and every other pooling with ``--pooling-seeds`` seeds; dev accuracy.
CommonLit: TF-IDF + ridge and BiLSTM regressor variants (one change each from the base config)
on the same 5 folds; CV RMSE.

Run:  OMP_NUM_THREADS=1 .venv/bin/python benchmarks/text_benchmarks.py sst2 [--seeds 3]
      OMP_NUM_THREADS=1 .venv/bin/python benchmarks/text_benchmarks.py commonlit [--variants base]
Writes benchmarks/results/{sst2,commonlit}.{md,json}; runs go to runs/benchmarks/, and a
finished run there is reused rather than trained again.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import KFold

from bistack.api import Classifier, Regressor
from bistack.data.tables import read_table
from bistack.runs.driver import RunOptions
from bistack.tasks import load_config
from bistack.training import train_config as train

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
RUNS = ROOT / "runs" / "benchmarks"


def train_and_score(config_path: Path, output: Path, overrides: list[str], kind, dev: Path) -> dict:
    """Train (unless ``output`` already holds a finished run: runs are reused), then score."""
    if not (output / "dev_metrics.json").exists():
        train(load_config(config_path, overrides), output, RunOptions(progress=False))
    model = kind.load(output / "model")
    with (output / "metrics.csv").open() as handle:
        seconds = float(list(csv.DictReader(handle))[-1]["seconds"])
    parameters = sum(p.numel() for p in model.model.parameters())
    return {"metrics": model.evaluate(dev).to_json(), "seconds": seconds, "parameters": parameters}


def sst2(seeds: int, pooling_seeds: int, poolings: list[str]) -> None:
    train_path, dev_path = DATA / "sst2" / "train.tsv", DATA / "sst2" / "dev.tsv"
    train = read_table(train_path, "sentence", ["label"])
    dev = read_table(dev_path, "sentence", ["label"])
    rows = []
    started = time.monotonic()
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    features = vectorizer.fit_transform([e.text for e in train])
    baseline = LogisticRegression(C=4.0, max_iter=2000).fit(features, [e.labels[0] for e in train])
    predicted = baseline.predict(vectorizer.transform([e.text for e in dev]))
    accuracy = 100 * float(np.mean(predicted == np.array([e.labels[0] for e in dev])))
    rows.append(
        {
            "model": "TF-IDF (1-2 grams) + logistic regression",
            "scores": [accuracy],
            "seconds": time.monotonic() - started,
            "parameters": features.shape[1] + 1,
        }
    )
    print(rows[-1], flush=True)
    config = ROOT / "configs" / "sst2-bilstm-attention.yaml"
    for pooling in poolings:
        runs = [
            train_and_score(
                config,
                RUNS / "sst2" / f"{pooling}-seed{seed}",
                [f"pooling.type={pooling}", f"train.seed={seed}"],
                Classifier,
                dev_path,
            )
            for seed in range(1, (seeds if pooling == "additive" else pooling_seeds) + 1)
        ]
        rows.append(
            {
                "model": f"BiLSTM 128 + {pooling} pooling",
                "scores": [r["metrics"]["accuracy"] for r in runs],
                "seconds": statistics.fmean(r["seconds"] for r in runs),
                "parameters": runs[0]["parameters"],
                "attention": [r["metrics"].get("attention") for r in runs],
            }
        )
        print(rows[-1], flush=True)
    write(
        "sst2",
        "SST-2 dev accuracy (%), 872 sentences; trained on train.tsv (67,349 phrases)",
        rows,
        "accuracy",
        f"benchmarks/text_benchmarks.py sst2 --seeds {seeds} --pooling-seeds {pooling_seeds}",
    )


# The search started from mean pooling (`mean`) and changed one thing at a time, so every gain
# is attributed. The reported model is the variant with the best inner-dev RMSE, chosen on the
# dev splits, never on the scored folds; the config now holds it (`max`, no overrides).
COMMONLIT_VARIANTS: dict[str, tuple[str, list[str]]] = {
    "mean": ("BiLSTM 128, char CNN, mean pooling, dropout 0.1", ["pooling.type=mean"]),
    "mean-dropout-0.3": ("mean, dropout 0.3", ["pooling.type=mean", "encoder.outer_dropout=0.3"]),
    "mean-dropout-0.5": ("mean, dropout 0.5", ["pooling.type=mean", "encoder.outer_dropout=0.5"]),
    "mean-lowercase": ("mean, words lowercased", ["pooling.type=mean", "features.lowercase=true"]),
    "additive": ("mean, with additive attention pooling instead", ["pooling.type=additive"]),
    "max": ("mean, with max pooling instead (commonlit-bilstm.yaml)", []),
    "max-dropout-0.5": ("max, dropout 0.5", ["encoder.outer_dropout=0.5"]),
}


def commonlit(folds: int, variants: list[str]) -> None:
    path = DATA / "commonlit" / "train.csv"
    examples = read_table(path, "excerpt", ["target"])
    texts = [e.text for e in examples]
    targets = np.array([float(e.labels[0]) for e in examples])
    splits = list(KFold(folds, shuffle=True, random_state=0).split(texts))
    workdir = RUNS / "commonlit"
    workdir.mkdir(parents=True, exist_ok=True)
    with path.open(newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    ridge_scores = []
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    for fold, (train_index, dev_index) in enumerate(splits):
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
        train_features = vectorizer.fit_transform([texts[i] for i in train_index])
        ridge = Ridge(alpha=1.0).fit(train_features, targets[train_index])
        predicted = ridge.predict(vectorizer.transform([texts[i] for i in dev_index]))
        ridge_scores.append(float(np.sqrt(np.mean((predicted - targets[dev_index]) ** 2))))
        fold_train, fold_dev = workdir / f"fold{fold}-train.csv", workdir / f"fold{fold}-dev.csv"
        for target_path, index in ((fold_train, train_index), (fold_dev, dev_index)):
            with target_path.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(records[0]))
                writer.writeheader()
                writer.writerows(records[i] for i in index)
        for name in variants:
            output = workdir / name / f"fold{fold}"
            # Early stopping and calibration use a split of the training folds, never the
            # held-out fold that is scored.
            overrides = [f"data.train={fold_train}", *COMMONLIT_VARIANTS[name][1]]
            run = train_and_score(
                ROOT / "configs" / "commonlit-bilstm.yaml", output, overrides, Regressor, fold_dev
            )
            run["inner_dev_rmse"] = json.loads((output / "dev_metrics.json").read_text())["rmse"]
            runs[name].append(run)
            print(
                f"fold {fold}: ridge {ridge_scores[-1]:.4f}  {name} "
                f"{run['metrics']['rmse']:.4f} (inner dev {run['inner_dev_rmse']:.4f})",
                flush=True,
            )
    chosen = min(variants, key=lambda n: statistics.fmean(r["inner_dev_rmse"] for r in runs[n]))
    rows = [
        {
            "model": "TF-IDF (1-2 grams) + ridge",
            "scores": ridge_scores,
            "seconds": 0.0,
            "parameters": None,
        }
    ]
    for name in variants:
        marker = " **(chosen on inner dev)**" if name == chosen and len(variants) > 1 else ""
        rows.append(
            {
                "model": f"`{name}`: {COMMONLIT_VARIANTS[name][0]}{marker}",
                "scores": [r["metrics"]["rmse"] for r in runs[name]],
                "inner_dev": [r["inner_dev_rmse"] for r in runs[name]],
                "seconds": statistics.fmean(r["seconds"] for r in runs[name]),
                "parameters": runs[name][0]["parameters"],
            }
        )
    scored = zip(runs[chosen], ridge_scores, strict=True)
    differences = [r["metrics"]["rmse"] - ridge for r, ridge in scored]
    mean_difference = statistics.fmean(differences)
    spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
    t = mean_difference / (spread / len(differences) ** 0.5) if spread else float("nan")
    verdict = (
        f"Chosen variant against the ridge, fold by fold: below it on "
        f"{sum(d < 0 for d in differences)} of {len(differences)} folds; paired difference "
        f"{mean_difference:+.3f} ± {spread:.3f} (t = {t:.1f}, {len(differences) - 1} degrees of "
        "freedom)."
    )
    write(
        "commonlit",
        f"CommonLit {folds}-fold CV RMSE (lower is better), {len(examples):,} excerpts",
        rows,
        "RMSE per fold",
        f"benchmarks/text_benchmarks.py commonlit --folds {folds} --variants {','.join(variants)}",
        verdict + "\n\n" + COMMONLIT_NOTES,
    )


COMMONLIT_NOTES = """
Protocol: the same KFold(5, shuffle, random_state=0) splits for every model. The ridge (alpha
1) trains on all four training folds. Each BiLSTM trains on 85% of them; the other 15%, the
inner dev split, chooses the epoch (early stopping by calibrated RMSE) and fits the output
calibration (`regression.calibrate`). The variant reported as the BiLSTM's result is the one with
the best mean inner-dev RMSE; the scored folds choose nothing.

How it got here:
1. The first recorded result, 0.735 ± 0.034, was a tie with the ridge. Early stopping then
   compared epochs by uncalibrated dev RMSE, which charged each epoch for an output shift that
   calibration removes afterwards; fold 3 stopped at epoch 2. Epochs are now compared by
   calibrated dev RMSE, the error the kept model will have. Same config: 0.728 ± 0.029 (row
   `mean`), fold 3 from 0.769 to 0.740.
2. From there, one change at a time, compared on inner dev RMSE (table): max pooling 0.694,
   dropout 0.5 0.696, dropout 0.3 0.701, mean pooling 0.704, additive attention 0.706,
   lowercased words 0.712. Max pooling is chosen and `configs/commonlit-bilstm.yaml` holds it.
3. Row `max-dropout-0.5` then combines the two best single changes; it is chosen only if its
   inner dev RMSE beats `max`'s (the marker in the table says which won).

The runs were trained at commit 8ee13cd, with torch's `nn.Dropout`. bistack's own `Dropout`
(the CPU speed work) draws different masks from the same distribution, so rerunning with the
current code gives numbers that differ by run-to-run noise. How the first configuration was
chosen (char CNN, random rather than length-bucketed batches, calibration) is in the git history
of this file: trials on fold 0's held-out part, disclosed there.
"""


def write(
    name: str, title: str, rows: list[dict], unit: str, command: str, notes: str = ""
) -> None:
    inner = any("inner_dev" in row for row in rows)  # CommonLit: the score variants are chosen by
    lines = [
        f"# {title}",
        "",
        f"Command: `OMP_NUM_THREADS=1 .venv/bin/python {command}`",
        "",
        f"| model | mean | std | {unit} |{' inner dev RMSE, mean |' if inner else ''}"
        " parameters | seconds per run |",
        f"|---|---:|---:|---|{'---:|' if inner else ''}---:|---:|",
    ]
    for row in rows:
        scores = row["scores"]
        std = statistics.stdev(scores) if len(scores) > 1 else 0.0
        dev = f" {statistics.fmean(row['inner_dev']):.3f} |" if "inner_dev" in row else " - |"
        lines.append(
            f"| {row['model']} | {statistics.fmean(scores):.3f} | {std:.3f} | "
            f"{', '.join(f'{s:.3f}' for s in scores)} |{dev if inner else ''}"
            f" {row['parameters'] or '-'} | {row['seconds']:.0f} |"
        )
    if notes:
        lines += ["", notes.strip()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=2))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("benchmark", choices=["sst2", "commonlit"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--pooling-seeds", type=int, default=1)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--poolings",
        default="additive,dot,last,mean,max",
        help="SST-2 poolings to run, comma-separated (finished runs are reused, so two "
        "processes can share the work and a last one writes the full table)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(COMMONLIT_VARIANTS),
        help="CommonLit BiLSTM variants to run, comma-separated (finished runs are reused)",
    )
    args = parser.parse_args()
    if args.benchmark == "sst2":
        sst2(args.seeds, args.pooling_seeds, args.poolings.split(","))
    else:
        commonlit(args.folds, args.variants.split(","))


if __name__ == "__main__":
    main()
