"""The base-size results pages, each written from its JSON alone, so that rerunning this script
reproduces every page byte for byte (a page is never edited by hand; tests/benchmarks/
test_result_pages.py renders each again and compares). What a page says that no run's JSON
holds (a backbone pass's time read from its train.log, a figure from another page) comes from
``context.json`` beside them, each with where it was read.

    .venv/bin/python benchmarks/base_size_pages.py     # after benchmarks/base_size.sh

Writes benchmarks/results/base-size/{commonlit,commonlit-top-layers,sst2,conll03,
flair-side-by-side}.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "benchmarks" / "results" / "base-size"
DEV_NOTE = (
    "Dev scores throughout: each run's epoch was chosen on that same dev set (early stopping), "
    "so they run a little above what a held-out test set would give; the test splits are "
    "withheld."
)


def read(name: str) -> dict:
    return json.loads((PAGES / name).read_text(encoding="utf-8"))


def pooler_table(record: dict, digits: int) -> list[str]:
    """compare-poolers' table of ``record`` (its JSON): each pooler's mean ± std over its
    folds or seeds, each run's score, its parameters and training time."""
    from bistack.studies.repeated import RepeatedResult
    from bistack.studies.seed_table import Comparison, format_table

    results = [
        RepeatedResult(r["name"], r["scores"], r["parameters"], r["seconds"], r["runs"])
        for r in record["results"]
    ]
    comparison = Comparison("", "pooler", record["metric"], False, digits, "results")
    return format_table(comparison, results).splitlines()


def vectors_line(record: dict) -> str:
    said = {"mean": "each layer's token mean", "cls": "each layer's CLS vector"}
    last = {"mean": "the last layer's token mean", "cls": "the last layer's CLS vector"}
    parts = []
    for name, spec in record["vectors"].items():
        if "vectors" in spec:
            parts.append(f"{name}, {said[spec['vectors']]}")
        else:
            parts.append(f"{name}, {last[spec['type']]}")
    return "Vectors each run read: " + "; ".join(parts) + "."


def commonlit_page() -> str:
    record, blend, context = (
        read("commonlit.json"),
        read("commonlit-blend.json"),
        read("context.json")["commonlit"],
    )
    runs = sorted(blend["runs"], key=lambda run: run["cv"])
    best, second, third = runs[:3]
    by_name = {run["name"]: run for run in runs}
    minilm = json.loads((ROOT / context["minilm"]["file"]).read_text(encoding="utf-8"))
    minilm_cv = next(r["mean"] for r in minilm["results"] if r["name"] == context["minilm"]["row"])
    verdict = blend["verdict"]
    lines = [
        "# Layer poolers on all-mpnet-base-v2 (frozen): RMSE, 5-fold CV of CommonLit's "
        "train.csv (`configs/commonlit-mpnet-layers.yaml`, `--inner-dev`)",
        "",
        *pooler_table(record, 4),
        "",
        vectors_line(record),
        "",
        "The table's mean ± std is over the five folds' RMSEs (each fold scored on its own "
        "held-out rows). The blend below compares pooled scores instead: each run's CV RMSE "
        "over all its out-of-fold predictions at once, as `blend.json` records them.",
        "",
        "| run | CV RMSE (pooled) | blend weight |",
        "|---|---|---|",
        *(f"| {run['name']} | {run['cv']:.4f} | {run['weight']:.3f} |" for run in blend["runs"]),
        f"| **blend, nested** | **{blend['scores']['nested']:.4f}** | |",
        f"| blend, in-sample (optimistic) | {blend['scores']['in_sample']:.4f} | |",
        "",
        f"The backbone pass (all-mpnet-base-v2, `backbone.precision: bf16-mixed`, "
        f"{blend['rows']:,} excerpts in 512-subword windows, each layer's token means cached "
        f"once for every pooler and fold): {context['backbone_pass_seconds']} s on "
        f"{context['threads']} threads ({context['source']}). Pooled, the best runs are "
        f"{best['name']} ({best['cv']:.4f}), {second['name']} ({second['cv']:.4f}) and "
        f"{third['name']} ({third['cv']:.4f}), all far ahead of the last layer's mean "
        f"({by_name['mean']['cv']:.4f}) or CLS ({by_name['cls']['cv']:.4f}). Their blend "
        f"(nested: each fold's weights fitted on the other folds' out-of-fold predictions) reads "
        f"**{blend['scores']['nested']:.4f}**. The blend's verdict, from `commonlit-blend.json`: "
        f"{verdict['says']}. MiniLM's LSTM over the layers' means, the same recipe but for the "
        f"backbone, read {minilm_cv:.3f} (fold mean, `{context['minilm']['file']}`).",
        "",
        "Command: `make backbones`, then `OMP_NUM_THREADS=2 bash benchmarks/base_size.sh "
        "commonlit`; this page: `.venv/bin/python benchmarks/base_size_pages.py`.",
        "",
    ]
    return "\n".join(lines)


def commonlit_top_layers_page() -> str:
    """The LSTM over the layers' means with the top 2 layers trained, fold by fold beside the
    frozen one on the same folds, and against the frozen blend."""
    import statistics

    from bistack.metrics.noise import t_quantile_975

    top, context = read("commonlit-top2.json"), read("context.json")["commonlit_top2"]
    frozen = next(r for r in read("commonlit.json")["results"] if r["name"] == "lstm-mean")
    blend = read("commonlit-blend.json")
    by_fold = dict(zip(frozen["runs"], frozen["scores"], strict=True))
    names = list(top["folds"])
    tuned = [top["folds"][name]["score"] for name in names]
    still = [by_fold[name] for name in names]
    gains = [a - b for a, b in zip(still, tuned, strict=True)]  # RMSE: positive, top-2 better
    mean_gain = statistics.fmean(gains)
    error = statistics.stdev(gains) / len(gains) ** 0.5
    bound = t_quantile_975(len(gains) - 1) * error
    if abs(mean_gain) <= bound:
        verdict = f"within the noise of the folds ({mean_gain:+.4f} ± {bound:.4f}, 95%)"
    else:
        side = "better" if mean_gain > 0 else "worse"
        verdict = f"{side} beyond the noise of the folds ({mean_gain:+.4f} ± {bound:.4f}, 95%)"
    summary, nested = top["summary"], blend["scores"]["nested"]
    lines = [
        "# all-mpnet-base-v2 with its top 2 layers trained: RMSE, 5-fold CV of CommonLit's "
        "train.csv (`configs/commonlit-mpnet-top2.yaml`, `--inner-dev`)",
        "",
        "| fold | frozen (LSTM over the layers' means) | top 2 layers trained | seconds (fold) |",
        "|---|---|---|---|",
        *(
            f"| {name} | {by_fold[name]:.4f} | {top['folds'][name]['score']:.4f} | "
            f"{top['folds'][name]['seconds']:.0f} |"
            for name in names
        ),
        f"| mean ± std | {statistics.fmean(still):.4f} ± {statistics.stdev(still):.4f} | "
        f"{statistics.fmean(tuned):.4f} ± {statistics.stdev(tuned):.4f} | |",
        "",
        f"Pooled over every row's out-of-fold prediction, the top-2 run reads "
        f"**{summary['cv']:.4f}**; the frozen LSTM's pooled CV read {blend['runs'][0]['cv']:.4f} "
        f"and the frozen blend of six poolers, nested, **{nested:.4f}** "
        "(`commonlit-blend.json`). Fold by fold against the frozen LSTM on the same folds (the "
        "same table, `data.split_seed` and binned-target splitter), training the top 2 layers "
        f"is {verdict}: the mean gain in RMSE over its standard error, against Student's t at "
        f"{len(gains) - 1} degrees of freedom.",
        "",
        "The frozen side is the frozen table's run (`commonlit.md`: its whole pass in "
        "bfloat16, `backbone.precision: bf16-mixed`). The recipe: the frozen recipe's LSTM over "
        "each layer's token mean, with "
        "`backbone.finetune: 2`: the frozen bottom (layers 1-10) computed once in bfloat16 and "
        "cached for every fold, the top 2 layers trained in float32 at 1e-4 (the head at "
        "1e-3), 2 epochs, a warm-up then half a cosine, validated twice an epoch on an inner dev "
        "split; no setting was tuned on the held-out folds. A first run at 5e-5 over 3 epochs "
        "read 0.5622 on its first fold's inner dev, still falling at its last step; it was "
        "stopped (its code let MPNet's shared position bias train, since fixed) and this one "
        "started. Each fold's seconds include its training, its share of the bottom's pass and "
        f"its held-out pass, on 2 threads while other jobs shared the CPUs at times; "
        f"{context['paused']}.",
        "",
        "Command: `make backbones`, then `OMP_NUM_THREADS=2 bash benchmarks/base_size.sh "
        "commonlit-top2`; this page: `.venv/bin/python benchmarks/base_size_pages.py`.",
        "",
    ]
    return "\n".join(lines)


def sst2_page() -> str:
    record, context = read("sst2.json"), read("context.json")["sst2"]
    (lstm,) = record["results"]
    import statistics

    mean, std = statistics.fmean(lstm["scores"]), statistics.stdev(lstm["scores"])
    minilm = context["minilm"]
    lines = [
        "# Layer poolers on all-mpnet-base-v2 (frozen): accuracy, SST-2 dev, 3 seeds",
        "",
        *pooler_table(record, 2),
        "",
        vectors_line(record),
        "",
        "The layer classifier of `configs/sst2-mpnet-layers.yaml` (an LSTM over each layer's CLS "
        "vector, its final states; MiniLM's recipe with only the backbone and its precision, "
        f"`bf16-mixed`, changed; no setting tuned on dev), all 67,349 training sentences, "
        f"{len(lstm['scores'])} seeds: dev accuracy **{mean:.2f} ± {std:.2f}** against MiniLM's "
        f"{minilm['mean']:.2f} ± {minilm['std']:.2f} with the same recipe "
        f"(`{minilm['source']}`). {DEV_NOTE} The data's own anchors are dev scores too "
        "(`../shared/data/README.md`): BiLSTM baselines in the mid-80s, BERT-base about 92-93, "
        "both fine-tuned or trained end to end; this backbone is frozen. The backbone pass (each "
        "layer's CLS vector of every training and dev sentence, cached once for the three "
        f"seeds): {context['backbone_pass_minutes']} minutes on one thread while other jobs "
        f"shared the 2 CPUs ({context['source']}); training {lstm['seconds']:.0f} s a seed (one "
        "thread).",
        "",
        "Command: `make backbones`, then `OMP_NUM_THREADS=1 bash benchmarks/base_size.sh sst2`; "
        "this page: `.venv/bin/python benchmarks/base_size_pages.py`.",
        "",
    ]
    return "\n".join(lines)


def conll03_page() -> str:
    from base_size_report import render

    return render(read("conll03.json"))


def flair_page() -> str:
    from flair_side_by_side import render

    return render(read("flair-side-by-side.json"), read("flair-ablations.json"))


PAGE_MAKERS = {
    "commonlit.md": commonlit_page,
    "commonlit-top-layers.md": commonlit_top_layers_page,
    "sst2.md": sst2_page,
    "conll03.md": conll03_page,
    "flair-side-by-side.md": flair_page,
}


def main() -> None:
    for name, make in PAGE_MAKERS.items():
        (PAGES / name).write_text(make(), encoding="utf-8")
        print(f"wrote {PAGES / name}")


if __name__ == "__main__":
    main()
