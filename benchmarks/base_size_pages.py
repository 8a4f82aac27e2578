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


TOPS = (2, 4)  # the top layers trained, each run's JSON commonlit-top{K}.json


def fold_verdict(still: list[float], tuned: list[float]) -> str:
    """Fold by fold, a top-K run's RMSE against the frozen one's on the same folds: the mean
    gain against Student's t at 95% over its standard error."""
    import statistics

    from bistack.metrics.noise import t_quantile_975

    gains = [a - b for a, b in zip(still, tuned, strict=True)]  # RMSE: positive, top-K better
    mean_gain = statistics.fmean(gains)
    bound = t_quantile_975(len(gains) - 1) * statistics.stdev(gains) / len(gains) ** 0.5
    if abs(mean_gain) <= bound:
        return f"within the noise of the folds ({mean_gain:+.4f} ± {bound:.4f}, 95%)"
    side = "better" if mean_gain > 0 else "worse"
    return f"{side} beyond the noise of the folds ({mean_gain:+.4f} ± {bound:.4f}, 95%)"


def top_blend_lines(frozen: dict) -> list[str]:
    """The blend of the frozen poolers' CVs and the top-K runs (``commonlit-top-blend.json``,
    once ``base_size.sh commonlit-blend`` has run), against the ``frozen`` blend (its JSON):
    fold by fold on the same folds where both record their nested scores so."""
    if not (PAGES / "commonlit-top-blend.json").is_file():
        return ["The blend of the frozen and top-K runs: not run yet (`commonlit-blend`).", ""]
    blend = read("commonlit-top-blend.json")
    nested, frozen_nested = blend["scores"]["nested"], frozen["scores"]["nested"]
    against = ""
    if "nested_by_fold" in blend["scores"] and "nested_by_fold" in frozen["scores"]:
        folds = fold_verdict(frozen["scores"]["nested_by_fold"], blend["scores"]["nested_by_fold"])
        against = f" Fold by fold against the frozen blend (nested both) it is {folds}."
    return [
        "## The frozen poolers and the top-K runs, blended",
        "",
        "| run | CV RMSE (pooled) | blend weight | blend without it (in-sample) |",
        "|---|---|---|---|",
        *(
            f"| {run['name']} | {run['cv']:.4f} | {run['weight']:.3f} | "
            f"{run['blend_without_it']:.4f} |"
            for run in blend["runs"]
        ),
        f"| **blend, nested** | **{nested:.4f}** | | |",
        f"| blend, in-sample (optimistic) | {blend['scores']['in_sample']:.4f} | | |",
        "",
        f"Nested (each fold's weights fitted on the other folds' out-of-fold predictions), the "
        f"blend of the frozen and top-K runs reads **{nested:.4f}** against the frozen blend's "
        f"{frozen_nested:.4f} (`commonlit-blend.json`, {nested - frozen_nested:+.4f}).{against} "
        f"Its verdict against its best run, from `commonlit-top-blend.json`: "
        f"{blend['verdict']['says']}.",
        "",
    ]


def commonlit_top_layers_page() -> str:
    """The LSTM over the layers' means with its top K layers trained, fold by fold beside the
    frozen one on the same folds, then blended with the frozen poolers."""
    import statistics

    found = [k for k in TOPS if (PAGES / f"commonlit-top{k}.json").is_file()]
    tops = {k: read(f"commonlit-top{k}.json") for k in found}
    context = read("context.json")
    frozen = next(r for r in read("commonlit.json")["results"] if r["name"] == "lstm-mean")
    blend = read("commonlit-blend.json")
    by_fold = dict(zip(frozen["runs"], frozen["scores"], strict=True))
    names = list(tops[2]["folds"])
    still = [by_fold[name] for name in names]
    tuned = {k: [top["folds"][name]["score"] for name in names] for k, top in tops.items()}
    header = " | ".join(f"top {k} trained" for k in tops)
    seconds = " | ".join(f"seconds, top {k}" for k in tops)
    rows = [
        f"| {name} | {by_fold[name]:.4f} | "
        + " | ".join(f"{top['folds'][name]['score']:.4f}" for top in tops.values())
        + " | "
        + " | ".join(f"{top['folds'][name]['seconds']:.0f}" for top in tops.values())
        + " |"
        for name in names
    ]
    spread = " | ".join(
        f"{statistics.fmean(t):.4f} ± {statistics.stdev(t):.4f}" for t in tuned.values()
    )
    pooled = "; ".join(
        f"the top-{k} run **{top['summary']['cv']:.4f}** (fold by fold against the frozen LSTM "
        f"{fold_verdict(still, tuned[k])})"
        for k, top in tops.items()
    )
    lines = [
        "# all-mpnet-base-v2 with its top layers trained: RMSE, 5-fold CV of CommonLit's "
        "train.csv (`configs/commonlit-mpnet-top2.yaml`, `-top4.yaml`, `--inner-dev`)",
        "",
        f"| fold | frozen (LSTM over the layers' means) | {header} | {seconds} |",
        "|---|---|" + "---|" * (2 * len(tops)),
        *rows,
        f"| mean ± std | {statistics.fmean(still):.4f} ± {statistics.stdev(still):.4f} | "
        f"{spread} |" + " |" * len(tops),
        "",
        f"Pooled over every row's out-of-fold prediction: {pooled}. The frozen LSTM's pooled CV "
        f"read {blend['runs'][0]['cv']:.4f} and the frozen blend of six poolers, nested, "
        f"**{blend['scores']['nested']:.4f}** (`commonlit-blend.json`). Each verdict: the mean "
        "gain in RMSE on the same folds (the same table, `data.split_seed` and binned-target "
        "splitter) over its standard error, against Student's t at "
        f"{len(names) - 1} degrees of freedom.",
        "",
        *top_blend_lines(blend),
        "The frozen side is the frozen table's run (`commonlit.md`: its whole pass in "
        "bfloat16, `backbone.precision: bf16-mixed`). The recipe: the frozen recipe's LSTM over "
        "each layer's token mean, with `backbone.finetune: K`: the frozen bottom (layers 1-10 "
        "for K = 2, 1-8 for K = 4) computed once in bfloat16 and cached for every fold, the top "
        "K layers trained in float32 at 1e-4 (the head at 1e-3), 2 epochs, a warm-up then half "
        "a cosine, validated twice an epoch on an inner dev split; no setting was tuned on the "
        "held-out folds, and K = 4 took K = 2's settings unchanged. A first top-2 run at 5e-5 "
        "over 3 epochs read 0.5622 on its first fold's inner dev, still falling at its last "
        "step; it was stopped (its code let MPNet's shared position bias train, since fixed) "
        "and this one started. Each fold's seconds include its training, its share of the "
        "bottom's pass and its held-out pass, on 2 threads while other jobs shared the CPUs at "
        f"times; top 2: {context['commonlit_top2']['paused']}"
        + "".join(
            f"; top {k}: {context[f'commonlit_top{k}']['paused']}"
            for k in tops
            if k != 2 and f"commonlit_top{k}" in context
        )
        + ".",
        "",
        "Commands: `make backbones`, then `OMP_NUM_THREADS=2 bash benchmarks/base_size.sh "
        "commonlit-top2` (and `commonlit-top4`, then `commonlit-blend`); this page: "
        "`.venv/bin/python benchmarks/base_size_pages.py`.",
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
        *sst2_top_lines(lstm["scores"]),
    ]
    return "\n".join(lines)


def seeds_verdict(still: list[float], tuned: list[float]) -> str:
    """Two sets of seeds (not paired: a seed's runs share no split), ``tuned``'s mean gain
    over ``still``'s against Welch's t at 95% (its degrees of freedom rounded down)."""
    import statistics

    from bistack.metrics.noise import t_quantile_975

    runs = (still, tuned)
    shares = [statistics.variance(s) / len(s) for s in runs]
    error = sum(shares) ** 0.5
    degrees = sum(shares) ** 2 / sum(v**2 / (len(s) - 1) for v, s in zip(shares, runs, strict=True))
    gain = statistics.fmean(tuned) - statistics.fmean(still)
    bound = t_quantile_975(max(1, int(degrees))) * error
    where = (
        "within the noise of the seeds"
        if abs(gain) <= bound
        else (("better" if gain > 0 else "worse") + " beyond the noise of the seeds")
    )
    return f"{where} ({gain:+.2f} ± {bound:.2f} points, 95%, Welch's t at {int(degrees)} df)"


def sst2_top_lines(still: list[float]) -> list[str]:
    """The same classifier with its top 2 layers trained (``sst2-top2.json``, once
    ``base_size.sh sst2-top2`` has run) against the frozen seeds' accuracies ``still``."""
    import statistics

    if not (PAGES / "sst2-top2.json").is_file():
        return []
    record, context = read("sst2-top2.json"), read("context.json")["sst2_top2"]
    (top,) = record["results"]
    mean, std = statistics.fmean(top["scores"]), statistics.stdev(top["scores"])
    lines = [
        "## With its top 2 layers trained",
        "",
        *pooler_table(record, 2),
        "",
        "The same classifier with `backbone.finetune: 2` (`configs/sst2-mpnet-top2.yaml`): the "
        "frozen bottom (layers 1-10) computed once in bfloat16 and cached for every seed, the "
        "top 2 layers trained in float32 at 1e-4 (the head at 1e-3) for one epoch, a warm-up "
        "then half a cosine, validated on dev after steps 526, 1,052, 1,578 and 2,104 and at the "
        "epoch's end, 2,105 (the code of these runs took a quarter of the epoch as 526 steps "
        "and repeated it; a quarter now validates at 526, 1,052, 1,579 and the end), the best "
        "validation kept, so the note on dev scores above holds. Its settings are CommonLit's "
        "top-2 recipe's "
        "(`configs/commonlit-mpnet-top2.yaml`); none was tuned on SST-2's dev. "
        f"{len(top['scores'])} seeds: dev accuracy **{mean:.2f} ± {std:.2f}** against the "
        f"frozen {statistics.fmean(still):.2f} ± {statistics.stdev(still):.2f}, "
        f"{seeds_verdict(still, top['scores'])}. The published figure for MPNet-base "
        "fine-tuned whole is about 95.5 dev. The frozen bottom's pass (every training and dev "
        f"sentence through layers 1-10, once for the {len(top['scores'])} seeds): "
        f"{context['bottom_pass_minutes']} minutes on {context['threads']} threads "
        f"({context['source']}); training {top['seconds']:.0f} s a seed on "
        f"{context['threads']} threads, its dev passes included{context['paused']}.",
        "",
        f"Command: `make backbones`, then `OMP_NUM_THREADS={context['threads']} bash "
        "benchmarks/base_size.sh sst2-top2`; this page: `.venv/bin/python "
        "benchmarks/base_size_pages.py`.",
        "",
    ]
    return lines


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
