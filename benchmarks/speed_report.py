"""Tables, targets and the scaling chart of ``make bench`` (see speed.py)."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def row_of(results: dict, name: str, item: str) -> dict | None:
    for row in results.get(name, []):
        if row["item"] == item:
            return row
    return None


def training_lines(results: dict) -> tuple[list[str], list[str]]:
    lines = [
        "## Training: BiLSTM-CRF step on CoNLL-2003 (word 100, char BiLSTM 25, BiLSTM 256, CRF,"
        " batch 32)",
        "",
        "A step is collate, forward, CRF loss, backward, clipping and Adam. The bare `nn.LSTM`"
        " (256 per direction) runs forward+backward on a random tensor of the same padded shape"
        " as each bistack batch, alternating with it batch by batch.",
        "",
        "| batches | bistack tokens/s | bare nn.LSTM tokens/s | step / bare | Flair tokens/s |"
        " bistack / Flair | peak RSS bistack / Flair (MB) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    targets = []
    for which in ("bucketed", "random", "charcnn"):
        ours = row_of(results, f"bistack train-{which}", f"train-{which}")
        flair = row_of(results, f"flair train-{which}", f"train-{which}")
        if ours is None:
            continue
        flair_speed = f"{flair['flair_tokens_per_s']:,.0f}" if flair else "not run"
        over_flair = (
            f"{ours['bistack_tokens_per_s'] / flair['flair_tokens_per_s']:.1f}x" if flair else "-"
        )
        memory = f"{ours['peak_rss_mb']:,.0f} / " + (
            f"{flair['peak_rss_mb']:,.0f}" if flair else "-"
        )
        label = "bucketed, char CNN instead of char BiLSTM" if which == "charcnn" else which
        lines.append(
            f"| {label} | {ours['bistack_tokens_per_s']:,.0f} | "
            f"{ours['bare_lstm_tokens_per_s']:,.0f} | {ours['ratio_to_bare_lstm']:.2f} | "
            f"{flair_speed} | {over_flair} | {memory} |"
        )
    bucketed = row_of(results, "bistack train-bucketed", "train-bucketed")
    if bucketed:
        lines += ["", *profile_lines(bucketed)]
    for which, label in (("bucketed", "char BiLSTM"), ("charcnn", "char CNN")):
        row = row_of(results, f"bistack train-{which}", f"train-{which}")
        if row:
            ratio = row["ratio_to_bare_lstm"]
            targets.append(
                f"| training step within 1.5x the bare nn.LSTM ({label}) | {ratio:.2f}x |"
                f" {verdict(ratio <= 1.5)} |"
            )
    flair_random = row_of(results, "flair train-random", "train-random")
    if bucketed and flair_random:
        # Each tool as its trainer runs it: bistack buckets by length, Flair shuffles.
        speedup = bucketed["bistack_tokens_per_s"] / flair_random["flair_tokens_per_s"]
        targets.append(
            f"| training >= 3x Flair (each with its own trainer's batches) | {speedup:.1f}x |"
            f" {verdict(speedup >= 3)} |"
        )
    return lines, targets


def profile_lines(row: dict) -> list[str]:
    """Where a bucketed step's time goes, against the bare LSTM's forward and backward."""
    phases = row["phase_ms"]
    total = sum(phases.values())
    bare = row["bare_forward_ms"] + row["bare_backward_ms"]
    lines = [
        "Where a bucketed step's time goes (ms per batch; backward covers every layer's"
        " gradients, char BiLSTM and CRF included):",
        "",
        "| phase | ms | share of step | bare nn.LSTM ms |",
        "|---|---:|---:|---:|",
    ]
    reference = {"encode": row["bare_forward_ms"], "backward": row["bare_backward_ms"]}
    for phase, spent in phases.items():
        bare_part = f"{reference[phase]:.1f}" if phase in reference else ""
        lines.append(f"| {phase} | {spent:.1f} | {spent / total:.0%} | {bare_part} |")
    lines.append(f"| **step** | **{total:.1f}** | 100% | **{bare:.1f}** |")
    return lines


def prediction_lines(results: dict) -> tuple[list[str], list[str]]:
    lines = [
        "## Prediction: CoNLL-2003 dev sentences, tags out",
        "",
        "bistack: `Tagger.tag_tokens` (encode, collate, forward, Viterbi, tag strings). Flair:"
        " `SequenceTagger.predict` on ready-made `Sentence` objects (their construction is not"
        " timed).",
        "",
        "| batch | bistack sentences/s | Flair sentences/s | bistack / Flair |"
        " peak RSS bistack / Flair (MB) |",
        "|---:|---:|---:|---:|---:|",
    ]
    targets = []
    for batch_size in (32, 256):
        ours = row_of(results, "bistack predict", f"predict-{batch_size}")
        flair = row_of(results, "flair predict", f"predict-{batch_size}")
        if ours is None:
            continue
        speed = ours["bistack_sentences_per_s"]
        if flair:
            speedup = speed / flair["flair_sentences_per_s"]
            lines.append(
                f"| {batch_size} | {speed:,.0f} | {flair['flair_sentences_per_s']:,.0f} |"
                f" {speedup:.1f}x | {ours['peak_rss_mb']:,.0f} / {flair['peak_rss_mb']:,.0f} |"
            )
            targets.append(
                f"| prediction >= 3x Flair, batch {batch_size} | {speedup:.1f}x |"
                f" {verdict(speedup >= 3)} |"
            )
        else:
            lines.append(
                f"| {batch_size} | {speed:,.0f} | not run | - | {ours['peak_rss_mb']:,.0f} |"
            )
    return lines, targets


def onnx_lines(results: dict) -> list[str]:
    rows = results.get("bistack onnx", [])
    if not rows:
        return []
    by_item = {row["item"]: row for row in rows}
    lines = [
        "## Prediction on onnxruntime (`bistack export`) against PyTorch eager",
        "",
        "The same tagger (char BiLSTM, BiLSTM, CRF; the Viterbi decode inside the ONNX graph),"
        " `tag_tokens` on CoNLL-2003 dev sentences; each runtime in a process of its own, three"
        " alternating runs, medians. The onnxruntime process never imports torch: its peak"
        " memory is what a machine without PyTorch needs.",
        "",
        "| batch | PyTorch eager sentences/s | onnxruntime sentences/s | onnxruntime / eager |"
        " peak RSS eager / onnxruntime (MB) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for batch_size in (1, 32):
        eager, onnx = by_item.get(f"eager-{batch_size}"), by_item.get(f"onnx-{batch_size}")
        if eager is None or onnx is None:
            continue
        ratio = onnx["sentences_per_s"] / eager["sentences_per_s"]
        lines.append(
            f"| {batch_size} | {eager['sentences_per_s']:,.0f} | {onnx['sentences_per_s']:,.0f} |"
            f" {ratio:.2f}x | {eager['runtime_peak_rss_mb']:,.0f} /"
            f" {onnx['runtime_peak_rss_mb']:,.0f} |"
        )
    return [*lines, ""]


def cells_lines(results: dict) -> list[str]:
    """The parallel-scan cells (minGRU, minLSTM) against the LSTM and the bare nn.LSTM."""
    rows = results.get("bistack cells", [])
    if not rows:
        return []
    encoders = [r for r in rows if "lstm_ms" in r]
    steps = [r for r in rows if "step_ms" in r]
    lines = [
        "## Parallel-scan cells: minGRU and minLSTM against the LSTM",
        "",
        "Encoder forward+backward, bidirectional, 256 per direction over 150 features, batch 32,"
        " each timed alternating with the bare nn.LSTM of the same width and depth (ms; the"
        " ratio is to the bare LSTM of the same pairing).",
        "",
        "| shape | bare nn.LSTM | our LSTM | minGRU | minLSTM | minGRU / bare | minLSTM / bare |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in encoders:
        lines.append(
            f"| {r['what']} | {r['lstm_bare_ms']:.1f} | {r['lstm_ms']:.1f} | "
            f"{r['mingru_ms']:.1f} | {r['minlstm_ms']:.1f} | "
            f"{r['mingru_ms'] / r['mingru_bare_ms']:.2f} | "
            f"{r['minlstm_ms'] / r['minlstm_bare_ms']:.2f} |"
        )
    if steps:
        lstm = next(r for r in steps if r["cell"] == "lstm")
        lines += [
            "",
            "| whole CoNLL-2003 tagger training step (bucketed batches of 32) | ms | tokens/s |"
            " speed-up over the LSTM tagger |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {r['cell']} | {r['step_ms']:.1f} | {r['tokens_per_s']:,.0f} | "
            f"{lstm['step_ms'] / r['step_ms']:.2f}x |"
            for r in steps
        ]
    return [*lines, ""]


def encoder_lines(results: dict) -> list[str]:
    rows = results.get("bistack encoder", [])
    ablations = results.get("bistack ablations", [])
    lines = []
    if rows:
        lines += [
            "## The encoder against PyTorch's packed path and the bare LSTM",
            "",
            "Same weights; lengths drawn between half and all of the padded width.",
            "",
            "| what | bistack ms | packed nn.LSTM ms | bare nn.LSTM ms (reads padding) |"
            " bistack / bare |",
            "|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r['what']} | {r['bistack_ms']:.1f} | {r['packed_ms']:.1f} | {r['bare_ms']:.1f} |"
            f" {r['bistack_ms'] / r['bare_ms']:.2f} |"
            for r in rows
        ]
        lines.append("")
    if ablations:
        lines += [
            "## Each speed change undone in turn (bucketed training steps, alternating)",
            "",
            "| variant | ms per step | slower than with every change |",
            "|---|---:|---:|",
        ]
        lines += [f"| {r['what']} | {r['step_ms']:.1f} | {r['slowdown']:.2f}x |" for r in ablations]
        lines.append("")
    return lines


def crf_lines(results: dict) -> tuple[list[str], list[str]]:
    rows = results.get("bistack crf", [])
    lines = [
        "## CRF against pytorch-crf 0.7.2 (same weights, interleaved calls)",
        "",
        "| what | bistack ms | pytorch-crf ms | speed-up |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['what']} | {r['bistack_ms']:.3f} | {r['pytorch_crf_ms']:.3f} | {r['speedup']:.1f}x |"
        for r in rows
    ]
    if rows:
        lines += ["", f"Peak RSS: {rows[0]['peak_rss_mb']:,.0f} MB."]
    viterbi = [r["speedup"] for r in rows if "Viterbi" in r["what"]]
    targets = []
    if viterbi:
        targets.append(
            f"| Viterbi >= 5x pytorch-crf at batch 32 | {min(viterbi):.1f}x (slowest shape) |"
            f" {verdict(min(viterbi) >= 5)} |"
        )
    return lines, targets


def cache_lines(results: dict) -> tuple[list[str], list[str]]:
    rows = results.get("bistack cache", [])
    if not rows:
        return [], []
    lines = [
        "## Frozen-transformer feature cache (all-MiniLM-L6-v2, batch 32)",
        "",
        "| what | recompute s | cached s | speed-up |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {r['what']} | {r['recompute_s']:.2f} | {r['cached_s']:.3f} | {r['speedup']:.0f}x |"
        for r in rows
    ]
    lines += [
        "",
        "Cached: the epoch reads the per-layer vectors back from the on-disk cache, then trains"
        " the pooler. Recompute: it runs MiniLM over the texts again first. Peak RSS:"
        f" {rows[0]['peak_rss_mb']:,.0f} MB.",
    ]
    for missed in (r for r in rows if r["speedup"] < 10):
        texts = missed["what"].split(" over ")[1]
        same_texts = [r for r in rows if r["what"].endswith(texts)]
        cheapest = min(same_texts, key=lambda r: r["cached_s"])
        pooler = missed["what"].split(",")[0]
        lines += [
            "",
            f"What bounds the {pooler} on {texts.split(' ', 1)[1]}: the cheapest cached epoch"
            f" over the same texts ({cheapest['cached_s']:.3f} s, {cheapest['what'].split(',')[0]})"
            " bounds what reading the cache costs. The rest of its cached epoch"
            f" ({missed['cached_s']:.3f} s) is the pooler's own training, which no cache removes."
            " The speed-up is therefore (MiniLM forward + pooler training) / pooler training:"
            f" {missed['speedup']:.0f}x however fast the cache is. It grows with text length,"
            " because the forward pass the cache saves does, and the pooler's cost does not.",
        ]
    targets = [
        f"| feature cache >= 10x per pooler epoch, {r['what'].replace(', an epoch over', ',')} |"
        f" {r['speedup']:.0f}x | {verdict(r['speedup'] >= 10)} |"
        for r in rows
    ]
    return lines, targets


def op_profile_lines(results: dict) -> list[str]:
    """The op-level profile (speed_profile.py) behind the step and cache targets."""
    rows = results.get("bistack profile", [])
    steps = [r for r in rows if r["item"] == "profile-step"]
    pooler = next((r for r in rows if r["item"] == "profile-pooler"), None)
    if not steps or pooler is None:
        return []
    lines = [
        "## Op-level profile: what bounds the two missed targets",
        "",
        f"torch.profiler over {steps[0]['steps']} bucketed training steps per char encoder, each"
        " alternating with the bare nn.LSTM on the same padded shape. Every op's self time is"
        " counted once, so the rows add up to the profiled step; the profiler's own overhead"
        " makes profiled steps slower than unprofiled ones (last rows).",
        "",
        "| where a step's time goes (ms per step) | "
        + " | ".join(f"{r['what']} ms | share" for r in steps)
        + " |",
        "|---|" + "---:|---:|" * len(steps),
    ]
    for category in steps[0]["category_ms"]:
        cells = []
        for r in steps:
            spent, total = r["category_ms"][category], sum(r["category_ms"].values())
            cells.append(f"{spent:.1f} | {spent / total:.0%}")
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    totals = " | ".join(f"**{sum(r['category_ms'].values()):.1f}** | 100%" for r in steps)
    bare = " | ".join(
        f"{r['bare_ms']:.1f} ({r['bare_kernels_ms']:.1f} in its kernels) | " for r in steps
    )
    unprofiled = " | ".join(f"{r['unprofiled_step_ms']:.1f} | " for r in steps)
    lines += [
        f"| **profiled step** | {totals} |",
        f"| the bare nn.LSTM, profiled alongside | {bare} |",
        f"| the same steps unprofiled | {unprofiled} |",
        "",
    ]
    for r in steps:
        word = r["category_ms"][next(iter(r["category_ms"]))]
        rest = sum(r["category_ms"].values()) - word
        lines.append(
            f"- {r['what']}: the word BiLSTM's kernels take {word:.1f} ms against the bare"
            f" LSTM's {r['bare_kernels_ms']:.1f} ms. Within 1.5x the bare LSTM"
            f" ({1.5 * r['bare_ms']:.1f} ms), everything else would have to fit in"
            f" {1.5 * r['bare_ms'] - word:.1f} ms; it takes {rest:.1f} ms."
        )
    categories = pooler["category_s"]
    epoch = sum(categories.values())
    kernels = next(iter(categories.values()))
    minilm, unprofiled_epoch = pooler["minilm_forward_s"], pooler["unprofiled_epoch_s"]
    lines += [
        "",
        f"| where a cached epoch of the {pooler['what'].split(',')[0]} goes"
        f" ({pooler['what'].split(', ')[1]}) | s | share |",
        "|---|---:|---:|",
        *(f"| {name} | {spent:.3f} | {spent / epoch:.0%} |" for name, spent in categories.items()),
        f"| **profiled epoch** | **{epoch:.3f}** | 100% |",
        f"| the same epoch unprofiled | {unprofiled_epoch:.3f} | |",
        f"| MiniLM's forward pass over the same texts (what the cache saves) | {minilm:.3f} | |",
        "",
        f"The cache saves MiniLM's forward pass and nothing else, so its speed-up is at most"
        f" (MiniLM + epoch) / epoch = {(minilm + unprofiled_epoch) / unprofiled_epoch:.1f}x here."
        f" Reaching 10x would need the cached epoch within {minilm / 9:.3f} s; the pooler's"
        f" own BiLSTM kernels take {kernels:.3f} s of it.",
    ]
    return lines


def scaling_lines(results: dict, chart: Path) -> list[str]:
    rows = results.get("bistack scaling", [])
    if not rows:
        return []
    lines = [
        "## Scaling: training-step cost as the work grows",
        "",
        "Synthetic sentences of exactly the given length, so there is no padding.",
        "",
        "| batch | length | tokens | bistack ms | us per token | bare nn.LSTM ms | step / bare |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        tokens = r["batch_size"] * r["seq_len"]
        lines.append(
            f"| {r['batch_size']} | {r['seq_len']} | {tokens} | {r['bistack_ms']:.1f} |"
            f" {r['bistack_us_per_token']:.1f} | {r['bare_lstm_ms']:.1f} |"
            f" {r['bistack_ms'] / r['bare_lstm_ms']:.2f} |"
        )
    lines += ["", f"Peak RSS: {rows[0]['peak_rss_mb']:,.0f} MB. Chart: `{chart.name}`."]
    plot_scaling(rows, chart)
    return lines


def plot_scaling(rows: list[dict], path: Path) -> None:
    by_length = [r for r in rows if r["axis"] == "length"]
    by_batch = [r for r in rows if r["axis"] == "batch"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for axis, part, key, label in (
        (left, by_length, "seq_len", "sequence length (batch 32)"),
        (right, by_batch, "batch_size", "batch size (length 32)"),
    ):
        xs = [r[key] for r in part]
        axis.plot(xs, [r["bistack_tokens_per_s"] for r in part], "o-", label="bistack step")
        axis.plot(xs, [r["bare_lstm_tokens_per_s"] for r in part], "s--", label="bare nn.LSTM")
        axis.set_xscale("log", base=2)
        axis.set_xlabel(label)
        axis.set_ylabel("tokens / s")
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("BiLSTM-CRF training throughput (word 100 + char BiLSTM, BiLSTM 256, CRF)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def spacy_lines(output: Path) -> list[str]:
    """The spaCy comparison (``benchmarks/spacy_peer.py``, run before this report by ``make
    bench``), its table as that run wrote it."""
    path = output.with_name("spacy.md")
    if not path.exists():
        return []
    body = path.read_text(encoding="utf-8").splitlines()[1:]  # its own title dropped
    return ["## spaCy's CPU NER pipeline beside bistack (`results/spacy.md`)", *body, ""]


def write_report(results: dict, machine: str, command: str, rounds: int, output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    chart = output.with_name(output.name + "_scaling.png")
    training, t1 = training_lines(results)
    prediction, t2 = prediction_lines(results)
    crf, t3 = crf_lines(results)
    cache, t4 = cache_lines(results)
    lines = [
        "# Speed: bistack against the bare nn.LSTM, pytorch-crf and Flair 0.15.1, in one run",
        "",
        f"Machine: {machine}. Command: `{command}` (or `make bench`). Training and prediction"
        f" rows are medians over {rounds} rounds in which bistack's and Flair's processes"
        " alternate; each process's peak resident memory is reported with its rows.",
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---:|---|",
        *t1,
        *t2,
        *t3,
        *t4,
        "",
        *training,
        "",
        *prediction,
        "",
        *onnx_lines(results),
        *encoder_lines(results),
        *cells_lines(results),
        *spacy_lines(output),
        *crf,
        "",
        *cache,
        "",
        *op_profile_lines(results),
        "",
        *scaling_lines(results, chart),
        "",
    ]
    output.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")
    record = {"machine": machine, "command": command, "rounds": rounds, "results": results}
    output.with_suffix(".json").write_text(json.dumps(record, indent=1), encoding="utf-8")
