"""One measurement of ``make bench`` (bistack's side), run in its own process by speed.py.

Each item prints one JSON object: its rows plus ``peak_rss_mb``, the process's peak resident
memory, so every row's memory is its own. References (a bare ``nn.LSTM``, pytorch-crf) run in
the same process, interleaved with bistack call by call, so machine load hits both alike.

    python benchmarks/speed_items.py ITEM --plan PLAN.json [--threads N] [--quick]

ITEM: train-bucketed, train-random, train-charcnn, ablations, encoder, cells, predict, crf, cache,
scaling, profile.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from bistack.data.batching import collate_tagging
from bistack.data.features import TokenVocabularies
from bistack.kernels.crf_scan import log_partition_scan
from bistack.runs.optimizers import build_optimizer
from bistack.runs.vocabularies import singleton_mask
from bistack.schemes import convert_tags
from bistack.taggers.models.tagger import Tagger
from bistack.taggers.networks.network import build_tagger
from bistack.tasks import load_config

ROOT = Path(__file__).resolve().parent.parent
# The sizes: word embeddings 100, char BiLSTM, one BiLSTM layer of 256, CRF, batch 32.
# No casing feature: the peer has none, so both models see the same inputs.
TAGGER_OVERRIDES = ["encoder.hidden_size=256", "features.casing_dim=0", "train.batch_size=32"]


# The char CNN variant (Ma & Hovy 2016) with as many filters as the char BiLSTM has outputs.
CHAR_CNN = ["features.char_encoder=cnn", "features.char_hidden=50"]


def tagger_config(extra: list[str] | None = None):
    return load_config(ROOT / "configs/conll03-bilstm-crf.yaml", TAGGER_OVERRIDES + (extra or []))


def seconds(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def build_from_plan(plan: dict, extra: list[str] | None = None):
    """Tagger, vocabularies and encoded sentences for the plan's CoNLL training sentences, with
    the tags converted to the CRF's scheme as ``bistack train`` does (the file's IOB1 tags would
    break the BIOES constraints)."""
    config = tagger_config(extra)
    tags = [convert_tags(sentence_tags, config.data.scheme) for sentence_tags in plan["tags"]]
    pairs = list(zip(plan["tokens"], tags, strict=True))
    vocabularies = TokenVocabularies.build(pairs, min_freq=1, lowercase=True, normalise_digits=True)
    torch.manual_seed(0)
    model = build_tagger(config, vocabularies, singleton_mask(vocabularies, pairs))
    encoded = [vocabularies.encode(tokens, tags) for tokens, tags in pairs]
    return config, model, vocabularies, encoded


PHASES = ("collate", "embed", "encode", "loss", "backward", "clip", "optimizer")


def train_item(plan: dict, which: str, quick: bool, extra: list[str] | None = None) -> list[dict]:
    """Full training steps against a bare nn.LSTM forward+backward on the same padded batches,
    alternating batch by batch. Each step is timed by phase (what ``SequenceTagger.forward``
    and the training loop run, in order), so a missed target comes with its profile.

    ``which``: ``bucketed`` or ``random`` batches; ``charcnn``: bucketed, with the char CNN;
    ``extra``: more config overrides (another encoder cell, say)."""
    charcnn = which == "charcnn"
    overrides = (CHAR_CNN if charcnn else []) + (extra or [])
    config, model, vocabularies, encoded = build_from_plan(plan, overrides)
    batches = plan["bucketed_batches" if charcnn else f"{which}_batches"][: 12 if quick else None]
    optimizer = build_optimizer(config.optimizer, model)
    bare = nn.LSTM(model.embedder.output_size, 256, batch_first=True, bidirectional=True)
    model.train()
    phases = dict.fromkeys(PHASES, 0.0)
    bare_forward, bare_backward, tokens = 0.0, 0.0, 0
    for number, indices in enumerate(batches):
        times = {}
        clock = time.perf_counter()

        def lap(phase: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            times[phase] = now - clock
            clock = now

        batch = collate_tagging([encoded[i] for i in indices], vocabularies)
        lap("collate")
        embedded = model.dropout(model.embedder(batch))
        lap("embed")
        states = model.dropout(model.encoder(embedded, mask=batch.mask).states)
        lap("encode")
        loss = model.head.loss(states, batch.tags, batch.mask)
        lap("loss")
        loss.backward()
        lap("backward")
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        lap("clip")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        lap("optimizer")
        padded = torch.randn((*batch.words.shape, model.embedder.output_size))
        start = time.perf_counter()
        output = bare(padded)[0].sum()
        middle = time.perf_counter()
        output.backward()
        if number >= 3:  # warm-up
            for phase, spent in times.items():
                phases[phase] += spent
            bare_forward += middle - start
            bare_backward += time.perf_counter() - middle
            tokens += int(batch.mask.sum())
    ours = sum(phases.values())
    reference = bare_forward + bare_backward
    count = len(batches) - 3
    return [
        {
            "item": f"train-{which}",
            "what": "BiLSTM-CRF training step, CoNLL-2003, "
            + ("bucketed batches of 32, char CNN" if charcnn else f"{which} batches of 32"),
            "char_encoder": config.features.char_encoder,
            "tokens": tokens,
            "bistack_tokens_per_s": tokens / ours,
            "bare_lstm_tokens_per_s": tokens / reference,
            "ratio_to_bare_lstm": ours / reference,
            "phase_ms": {phase: 1000 * spent / count for phase, spent in phases.items()},
            "bare_forward_ms": 1000 * bare_forward / count,
            "bare_backward_ms": 1000 * bare_backward / count,
        }
    ]


def ablation_item(plan: dict, quick: bool) -> list[dict]:
    """Each speed change undone in turn, on the same bucketed steps, variants alternating batch
    by batch: how much slower the step gets without it (the evidence for keeping it)."""
    from bistack.dropout import Dropout
    from bistack.models.embeddings import CharLSTMEncoder

    batches = plan["bucketed_batches"][: 8 if quick else 40]
    variants = [
        "all changes",
        "char BiLSTM in one group",
        "Adam not fused",
        "CRF partition as a parallel scan",
        "torch's dropout (bernoulli_ mask)",
    ]
    setups = []
    for variant in variants:
        config, model, vocabularies, encoded = build_from_plan(plan)
        if variant == "Adam not fused":
            optimizer = torch.optim.Adam(model.parameters(), lr=config.optimizer.lr)
        else:
            optimizer = build_optimizer(config.optimizer, model)
        crf = model.head.crf
        if variant == "CRF partition as a parallel scan":
            crf._log_partition = log_partition_scan
        if variant.startswith("torch's dropout"):
            for module in list(model.modules()):
                for name, child in module.named_children():
                    if isinstance(child, Dropout):
                        setattr(module, name, nn.Dropout(child.p))
        model.train()
        setups.append((variant, model, optimizer, vocabularies, encoded))
    spent = dict.fromkeys(variants, 0.0)
    for number, indices in enumerate(batches):
        for variant, model, optimizer, vocabularies, encoded in setups:
            CharLSTMEncoder.length_groups = 1 if variant == "char BiLSTM in one group" else 3

            def step(model=model, optimizer=optimizer, vocabularies=vocabularies, encoded=encoded):
                batch = collate_tagging([encoded[i] for i in indices], vocabularies)
                model(batch).backward()
                nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

            took = seconds(step)
            if number >= 3:
                spent[variant] += took
    CharLSTMEncoder.length_groups = 3
    count = len(batches) - 3
    return [
        {
            "item": "ablation",
            "what": variant,
            "step_ms": 1000 * spent[variant] / count,
            "slowdown": spent[variant] / spent["all changes"],
        }
        for variant in variants
    ]


def encoder_item(quick: bool) -> list[dict]:
    """RecurrentEncoder against PyTorch's packed path with the same weights and against the
    bare (padding-reading) nn.LSTM: BiLSTM 256 over 150 features, batch 32, forward+backward."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    from bistack.encoders import RecurrentEncoder

    rows = []
    for seq_len in (40, 128):
        torch.manual_seed(0)
        inputs = torch.randn(32, seq_len, 150, requires_grad=True)
        lengths = torch.randint(seq_len // 2, seq_len + 1, (32,))
        lengths[0] = seq_len
        encoder = RecurrentEncoder(150, 256)
        bare = nn.LSTM(150, 256, batch_first=True, bidirectional=True)

        def ours(encoder=encoder, inputs=inputs, lengths=lengths) -> None:
            encoder(inputs, lengths=lengths).states.sum().backward()

        def packed(encoder=encoder, inputs=inputs, lengths=lengths) -> None:
            sequence = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
            output, _ = encoder.rnn(sequence)
            pad_packed_sequence(output, batch_first=True, total_length=seq_len)[0].sum().backward()

        ours_s, packed_s = interleaved(ours, packed, 3 if quick else 10)
        ours_again, bare_s = interleaved(
            ours,
            lambda bare=bare, inputs=inputs: bare(inputs)[0].sum().backward(),
            3 if quick else 10,
        )
        rows.append(
            {
                "item": "encoder",
                "what": f"BiLSTM 256 forward+backward, batch 32, length {seq_len}",
                "bistack_ms": 1000 * statistics.median([ours_s, ours_again]),
                "packed_ms": 1000 * packed_s,
                "bare_ms": 1000 * bare_s,
            }
        )
    return rows


MIN_CELLS = ("mingru", "minlstm")


def cells_item(plan: dict, quick: bool) -> list[dict]:
    """The parallel-scan cells against the LSTM: each encoder's forward+backward beside the
    bare nn.LSTM of the same width (bidirectional, 256 per direction, over 150 features, batch
    32) at CoNLL's lengths and at 128 and 512 tokens, for 1 and 3 layers; then whole CoNLL
    training steps of the tagger with each cell (bucketed batches, as ``train-bucketed``)."""
    from bistack.encoders import RecurrentEncoder

    rows = []
    repeats = 3 if quick else 10
    for seq_len, layers in [(40, 1), (128, 1), (512, 1), (40, 3), (128, 3)]:
        torch.manual_seed(0)
        inputs = torch.randn(32, seq_len, 150, requires_grad=True)
        lengths = torch.randint(seq_len // 2, seq_len + 1, (32,))
        lengths[0] = seq_len
        bare = nn.LSTM(150, 256, num_layers=layers, batch_first=True, bidirectional=True)

        def run_bare(bare=bare, inputs=inputs) -> None:
            bare(inputs)[0].sum().backward()

        row = {
            "item": "cells",
            "what": f"{layers} layer{'s' if layers > 1 else ''}, length {seq_len}",
        }
        for cell in ("lstm", *MIN_CELLS):
            encoder = RecurrentEncoder(150, 256, cell=cell, num_layers=layers)

            def ours(encoder=encoder, inputs=inputs, lengths=lengths) -> None:
                encoder(inputs, lengths=lengths).states.sum().backward()

            ours_s, bare_s = interleaved(ours, run_bare, repeats)
            row[f"{cell}_ms"] = 1000 * ours_s
            row[f"{cell}_bare_ms"] = 1000 * bare_s
        rows.append(row)
    for cell in ("lstm", *MIN_CELLS):
        (step,) = train_item(plan, "bucketed", quick, [f"encoder.cell={cell}"])
        rows.append(
            {
                "item": "cells",
                "what": f"CoNLL-2003 tagger training step, {cell}",
                "cell": cell,
                "step_ms": sum(step["phase_ms"].values()),
                "bare_ms": step["bare_forward_ms"] + step["bare_backward_ms"],
                "tokens_per_s": step["bistack_tokens_per_s"],
            }
        )
    return rows


def predict_item(plan: dict, quick: bool) -> list[dict]:
    """Sentences per second of ``Tagger.tag_tokens`` (collate, forward, Viterbi, tag strings)."""
    config, model, vocabularies, _ = build_from_plan(plan)
    tagger = Tagger(model, vocabularies, config, "IOB1")
    sentences = plan["predict_tokens"][: 500 if quick else None]
    rows = []
    for batch_size in (32, 256):
        tagger.tag_tokens(sentences[:256], batch_size=batch_size)  # warm-up
        times = [
            seconds(lambda b=batch_size: tagger.tag_tokens(sentences, batch_size=b))
            for _ in range(1 if quick else 3)
        ]
        rows.append(
            {
                "item": f"predict-{batch_size}",
                "what": f"prediction, CoNLL-2003 dev sentences, batch {batch_size}",
                "sentences": len(sentences),
                "bistack_sentences_per_s": len(sentences) / statistics.median(times),
            }
        )
    return rows


def onnx_item(plan: dict, quick: bool) -> list[dict]:
    """The plan's tagger (char BiLSTM, BiLSTM, CRF) predicting with PyTorch eager and with
    onnxruntime on its export, each in a process of its own (``speed_onnx.py``), alternating
    three times: sentences/s at batch 1 and 32, each runtime's peak memory."""
    from bistack.export.onnx_export import export_model

    config, model, vocabularies, _ = build_from_plan(plan)
    with tempfile.TemporaryDirectory() as folder:
        model_dir, export_dir = Path(folder) / "model", Path(folder) / "onnx"
        Tagger(model, vocabularies, config, "IOB1").save(model_dir)
        export_model(model_dir, export_dir)
        plan_file = Path(folder) / "plan.json"
        plan_file.write_text(json.dumps({"predict_tokens": plan["predict_tokens"]}))
        script = Path(__file__).with_name("speed_onnx.py")
        runs: dict[str, list[dict]] = {"eager": [], "onnx": []}
        for _ in range(1 if quick else 3):
            for runtime, directory in (("eager", model_dir), ("onnx", export_dir)):
                command = [sys.executable, str(script), runtime, str(directory)]
                command += ["--plan", str(plan_file)] + (["--quick"] if quick else [])
                done = subprocess.run(command, capture_output=True, text=True, check=True)
                runs[runtime].append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = []
    for measured in runs.values():
        for index, row in enumerate(measured[0]["rows"]):
            speeds = [run["rows"][index]["sentences_per_s"] for run in measured]
            rows.append(
                row
                | {
                    "sentences_per_s": statistics.median(speeds),
                    "runtime_peak_rss_mb": max(run["peak_rss_mb"] for run in measured),
                    "torch_loaded": measured[0]["torch_loaded"],
                }
            )
    return rows


def interleaved(ours: Callable, theirs: Callable, repeats: int) -> tuple[float, float]:
    """Medians of alternating calls."""
    ours(), theirs()
    a, b = [], []
    for _ in range(repeats):
        a.append(seconds(ours))
        b.append(seconds(theirs))
    return statistics.median(a), statistics.median(b)


def crf_item(quick: bool) -> list[dict]:
    """CRF nll forward+backward and Viterbi decode against pytorch-crf, batch 32."""
    import torchcrf

    from bistack.crf import CRF

    repeats = 5 if quick else 30
    rows = []
    for seq_len in (40, 128):
        for num_tags in (9, 17):
            torch.manual_seed(0)
            emissions = torch.randn(32, seq_len, num_tags, requires_grad=True)
            tags = torch.randint(num_tags, (32, seq_len))
            lengths = torch.randint(seq_len // 2, seq_len + 1, (32,))
            lengths[0] = seq_len
            mask = torch.arange(seq_len) < lengths.unsqueeze(1)
            ours, theirs = CRF(num_tags), torchcrf.CRF(num_tags, batch_first=True)
            theirs.load_state_dict(
                {k: v for k, v in ours.state_dict().items() if not k.endswith("_ok")}
            )
            nll = interleaved(
                lambda: ours.nll(emissions, tags, mask, reduction="sum").backward(),
                lambda: (-theirs(emissions, tags, mask, reduction="sum")).backward(),
                repeats,
            )
            with torch.inference_mode():
                decode = interleaved(
                    lambda: ours.decode(emissions, mask),
                    lambda: theirs.decode(emissions, mask),
                    repeats,
                )
            shape = f"batch 32, length {seq_len}, {num_tags} tags"
            for what, (ours_s, theirs_s) in (("nll forward+backward", nll), ("Viterbi", decode)):
                rows.append(
                    {
                        "item": "crf",
                        "what": f"CRF {what}, {shape}",
                        "bistack_ms": 1000 * ours_s,
                        "pytorch_crf_ms": 1000 * theirs_s,
                        "speedup": theirs_s / ours_s,
                    }
                )
    return rows


def cache_item(plan: dict, quick: bool) -> list[dict]:
    """Layer-pooler training epochs on cached MiniLM vectors against epochs that recompute them,
    for the seed's LSTM pooler (the costliest head) and for weighted layer pooling, on short
    texts (SST-2 sentences, classification) and long ones (CommonLit excerpts, regression).
    What the cache saves is the backbone's forward pass, which grows with text length."""
    from bistack.models.backbone import TransformerBackbone
    from bistack.models.feature_cache import cached_layer_vectors, model_fingerprint
    from bistack.text_models.layer_network import LayerBatch, build_layer_pooling_model

    backbone = TransformerBackbone.load("default")
    settings = {"max_length": backbone.max_length, "long_texts": "truncate", "stride": 0}
    fingerprint = model_fingerprint(backbone.folder)
    tasks = (
        (
            "SST-2 sentences",
            "sst2-minilm-layers.yaml",
            plan["texts"][: 128 if quick else 1024],
            torch.tensor(plan["text_labels"]),
        ),
        (
            "CommonLit excerpts",
            "commonlit-minilm-layers.yaml",
            plan["long_texts"][: 32 if quick else 256],
            torch.tensor(plan["long_text_targets"]).unsqueeze(1),
        ),
    )
    rows = []
    for name, config_name, texts, targets in tasks:
        targets = targets[: len(texts)]
        num_outputs = 2 if targets.dim() == 1 else 1

        def compute(texts=texts):
            with torch.inference_mode():
                return backbone.layer_vectors(texts, "truncate", batch_size=32)

        with tempfile.TemporaryDirectory() as cache_dir:
            cached_layer_vectors(cache_dir, fingerprint, texts, settings, compute)  # fill it
            for pooler in ("lstm", "weighted"):
                config = load_config(
                    ROOT / "configs" / config_name, [f"layer_pooling.type={pooler}"]
                )

                def pooler_epoch(layers: torch.Tensor, config=config, targets=targets) -> None:
                    torch.manual_seed(0)
                    head = build_layer_pooling_model(
                        config,
                        backbone.num_layers,
                        backbone.hidden_size,
                        num_outputs,
                        loss="mse" if num_outputs == 1 else "cross_entropy",
                    )
                    optimizer = build_optimizer(
                        config.optimizer, head, groups_of=head.parameter_groups
                    )
                    for start in range(0, len(layers), 32):
                        optimizer.zero_grad()
                        batch = LayerBatch(layers[start : start + 32], targets[start : start + 32])
                        head(batch).backward()
                        optimizer.step()

                def from_cache(pooler_epoch=pooler_epoch, texts=texts, compute=compute) -> None:
                    hit = cached_layer_vectors(cache_dir, fingerprint, texts, settings, compute)
                    assert not hit.computed
                    pooler_epoch(hit.vectors.cls)

                recompute = statistics.median(
                    seconds(lambda p=pooler_epoch, c=compute: p(c().cls)) for _ in range(2)
                )
                cached = statistics.median(seconds(from_cache) for _ in range(3))
                rows.append(
                    {
                        "item": "cache",
                        "what": f"{pooler} layer pooler, an epoch over {len(texts)} {name}",
                        "recompute_s": recompute,
                        "cached_s": cached,
                        "speedup": recompute / cached,
                    }
                )
    return rows


def scaling_item(plan: dict, quick: bool) -> list[dict]:
    """Training-step time against sequence length (batch 32) and batch size (length 32),
    on synthetic sentences of exactly that length, beside the bare nn.LSTM."""
    config, model, vocabularies, _ = build_from_plan(plan)
    optimizer = build_optimizer(config.optimizer, model)
    bare = nn.LSTM(model.embedder.output_size, 256, batch_first=True, bidirectional=True)
    words = [token for sentence in plan["tokens"] for token in sentence]
    generator = torch.Generator().manual_seed(0)
    lengths = (16, 32, 64) if quick else (16, 32, 64, 128, 256, 512)
    batch_sizes = (1, 8, 32) if quick else (1, 4, 16, 64, 256)
    shapes = [("length", 32, n) for n in lengths] + [("batch", b, 32) for b in batch_sizes]
    rows = []
    for axis, batch_size, seq_len in shapes:
        picks = torch.randint(len(words), (batch_size, seq_len), generator=generator).tolist()
        sentences = [vocabularies.encode([words[i] for i in row], ["O"] * seq_len) for row in picks]
        padded = torch.randn(batch_size, seq_len, model.embedder.output_size)

        def step(sentences=sentences) -> None:
            batch = collate_tagging(sentences, vocabularies)
            optimizer.zero_grad(set_to_none=True)
            model(batch).backward()
            optimizer.step()

        ours, theirs = interleaved(
            step, lambda padded=padded: bare(padded)[0].sum().backward(), 2 if quick else 5
        )
        tokens = batch_size * seq_len
        rows.append(
            {
                "item": "scaling",
                "axis": axis,
                "batch_size": batch_size,
                "seq_len": seq_len,
                "bistack_ms": 1000 * ours,
                "bare_lstm_ms": 1000 * theirs,
                "bistack_us_per_token": 1e6 * ours / tokens,
                "bistack_tokens_per_s": tokens / ours,
                "bare_lstm_tokens_per_s": tokens / theirs,
            }
        )
    return rows


def profile_item(plan: dict, quick: bool) -> list[dict]:
    """The op-level profile behind the two targets the bench can miss (speed_profile.py):
    bucketed training steps with either char encoder, and cached LSTM-pooler epochs."""
    from bistack.models.backbone import TransformerBackbone
    from speed_profile import pooler_profile, step_profile

    batches = plan["bucketed_batches"][: 8 if quick else 23]  # 3 warm-up, 20 profiled
    rows = []
    for extra, label in ((None, "char BiLSTM"), (CHAR_CNN, "char CNN")):
        config, model, vocabularies, encoded = build_from_plan(plan, extra)
        rows.append(step_profile(model, vocabularies, encoded, config, batches, label))
    backbone = TransformerBackbone.load("default")
    texts = plan["texts"][: 128 if quick else 1024]
    with torch.inference_mode():
        started = time.perf_counter()
        vectors = backbone.layer_vectors(texts, "truncate", batch_size=32)
        minilm = time.perf_counter() - started
    config = load_config(ROOT / "configs/sst2-minilm-layers.yaml", ["layer_pooling.type=lstm"])
    targets = torch.tensor(plan["text_labels"][: len(texts)])
    rows.append(pooler_profile(backbone, vectors.cls.clone(), targets, config, minilm))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "item",
        choices=[
            "train-bucketed",
            "train-random",
            "train-charcnn",
            "ablations",
            "encoder",
            "predict",
            "crf",
            "cache",
            "scaling",
            "profile",
            "onnx",
            "cells",
        ],
    )
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--quick", action="store_true", help="a few batches: checks it runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plan = json.loads(args.plan.read_text(encoding="utf-8"))
    if args.item.startswith("train-"):
        rows = train_item(plan, args.item.removeprefix("train-"), args.quick)
    elif args.item == "ablations":
        rows = ablation_item(plan, args.quick)
    elif args.item == "encoder":
        rows = encoder_item(args.quick)
    elif args.item == "predict":
        rows = predict_item(plan, args.quick)
    elif args.item == "crf":
        rows = crf_item(args.quick)
    elif args.item == "cache":
        rows = cache_item(plan, args.quick)
    elif args.item == "profile":
        rows = profile_item(plan, args.quick)
    elif args.item == "onnx":
        rows = onnx_item(plan, args.quick)
    elif args.item == "cells":
        rows = cells_item(plan, args.quick)
    else:
        rows = scaling_item(plan, args.quick)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    json.dump({"rows": rows, "peak_rss_mb": peak}, sys.stdout)


if __name__ == "__main__":
    main()
