"""bistack on a GPU beside hand-written floors of the same networks, in one process.

On CoNLL-2003 (the sizes of configs/conll03-bilstm-crf.yaml: word 100 + char BiLSTM 25 + casing
10, BiLSTM 200, CRF, batch 32):
- the floors (``../shared/gpu/floor.py``'s networks): the same network hand-written with a
  packed cuDNN ``nn.LSTM`` and a softmax head, or pytorch-crf's CRF; one timed training epoch
  (after one warm-up epoch) and prediction at batch 256;
- bistack's training epoch through its own loop (``bistack.runs.loop.run_epoch``: the batches,
  divergence checks and clipping ``bistack train`` runs), in float32 and bf16-mixed; prediction
  of tags at batch 256 and at batch 1 (p50), and with confidences at batch 256;
- the frozen feature cache of a MiniLM-shaped encoder (every layer of every word, brought to the
  host) against the encoder's bare forward over the same sentences;
- a BERT-large-shaped encoder fine-tuned under layer pooling, float32 against bf16-mixed;
- where a bistack training step spends its GPU time (the profiler's top kernels).

  python benchmarks/gpu.py --train T.txt --dev D.txt --backbone MINILM_DIR --large LARGE_DIR \
      [--device cuda] [--limit N] [--out benchmarks/results]

Writes gpu.md and gpu.json in --out. ``--device cpu --limit 200`` runs every row on the CPU, a
smoke test of the script (the suite runs it so).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bistack.data.batching import collate_tagging
from bistack.data.buckets import bucket_batches
from bistack.data.conll import read_conll
from bistack.data.features import TokenVocabularies
from bistack.runs.loop import build_optimizer, run_epoch
from bistack.runs.vocabularies import singleton_mask
from bistack.schemes import convert_tags
from bistack.taggers.network import build_tagger
from bistack.taggers.tagger import Tagger
from bistack.tasks import load_config

ROOT = Path(__file__).resolve().parent.parent


def synchronised(device: torch.device) -> Callable[[], None]:
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def timed(device: torch.device, work: Callable[[], object]) -> float:
    sync = synchronised(device)
    sync()
    start = time.perf_counter()
    work()
    sync()
    return time.perf_counter() - start


# ---- the floors: the same network, hand-written --------------------------------------------


class Floor(nn.Module):
    """word 100 + char BiLSTM 25 + casing 10 -> packed BiLSTM 200 -> softmax or pytorch-crf."""

    def __init__(self, words: int, chars: int, tags: int, crf: bool) -> None:
        super().__init__()
        self.w = nn.Embedding(words, 100, padding_idx=0)
        self.c = nn.Embedding(chars, 25, padding_idx=0)
        self.k = nn.Embedding(8, 10)
        self.clstm = nn.LSTM(25, 25, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(160, 200, batch_first=True, bidirectional=True)
        self.out = nn.Linear(400, tags)
        self.drop = nn.Dropout(0.5)
        if crf:
            from torchcrf import CRF

            self.crf = CRF(tags, batch_first=True)
        else:
            self.crf = None

    def emissions(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        words, casing, chars, char_lengths, lengths, _ = batch
        packed = pack_padded_sequence(
            self.c(chars), char_lengths, batch_first=True, enforce_sorted=False
        )
        _, (h, _) = self.clstm(packed)
        mask = words > 0
        spelled = torch.zeros(*words.shape, 50, device=words.device)
        spelled[mask] = torch.cat([h[0], h[1]], -1)
        x = self.drop(torch.cat([self.w(words), spelled, self.k(casing)], -1))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=words.size(1))
        return self.out(self.drop(out)), mask

    def loss(self, batch) -> torch.Tensor:
        emissions, mask = self.emissions(batch)
        tags = batch[-1]
        if self.crf is not None:
            return -self.crf(emissions, tags, mask, reduction="mean")
        return nn.functional.cross_entropy(emissions[mask], tags[mask])

    @torch.no_grad()
    def predict(self, batch) -> list:
        emissions, mask = self.emissions(batch)
        if self.crf is not None:
            return self.crf.decode(emissions, mask)
        return emissions.argmax(-1).cpu().tolist()


def floor_batch(sentences, words, chars, labels, device):
    """Padded tensors of ``sentences`` (tokens, tags) as floor.py builds them."""
    lengths = torch.tensor([len(tokens) for tokens, _ in sentences])
    width = int(lengths.max())
    flat = [token for tokens, _ in sentences for token in tokens]
    spelled = torch.zeros(len(flat), max(map(len, flat)), dtype=torch.long)
    for i, token in enumerate(flat):
        spelled[i, : len(token)] = torch.tensor([chars.get(c, 0) for c in token])
    w = torch.zeros(len(sentences), width, dtype=torch.long)
    k = torch.zeros_like(w)
    y = torch.zeros_like(w)
    for i, (tokens, tags) in enumerate(sentences):
        w[i, : len(tokens)] = torch.tensor([words.get(t.lower(), 1) for t in tokens])
        k[i, : len(tokens)] = torch.tensor([casing_class(t) for t in tokens])
        y[i, : len(tokens)] = torch.tensor([labels[t] for t in tags])
    char_lengths = torch.tensor([len(t) for t in flat])
    return (w.to(device), k.to(device), spelled.to(device), char_lengths, lengths, y.to(device))


def casing_class(token: str) -> int:
    return 1 if token.isupper() else 2 if token[:1].isupper() else 3 if token.isdigit() else 0


def floor_rows(train, device) -> list[dict]:
    words = {w: i + 2 for i, w in enumerate(sorted({t.lower() for s, _ in train for t in s}))}
    chars = {c: i + 1 for i, c in enumerate(sorted({c for s, _ in train for t in s for c in t}))}
    labels = {t: i for i, t in enumerate(sorted({t for _, tags in train for t in tags}))}
    order = sorted(range(len(train)), key=lambda i: len(train[i][0]))
    batches = [[train[i] for i in order[k : k + 32]] for k in range(0, len(order), 32)]
    random.Random(0).shuffle(batches)
    predict_batches = [[train[i] for i in order[k : k + 256]] for k in range(0, len(order), 256)]
    rows = []
    for crf in (False, True):
        torch.manual_seed(0)
        net = Floor(len(words) + 2, len(chars) + 1, len(labels), crf).to(device)
        optimizer = torch.optim.Adam(net.parameters(), lr=0.002)

        def epoch(net=net, optimizer=optimizer) -> None:
            net.train()
            for sentences in batches:
                optimizer.zero_grad()
                net.loss(floor_batch(sentences, words, chars, labels, device)).backward()
                nn.utils.clip_grad_norm_(net.parameters(), 5.0)
                optimizer.step()

        epoch()  # warm-up: cuDNN picks its kernels
        seconds = timed(device, epoch)
        net.eval()
        predict = timed(
            device,
            lambda net=net: [
                net.predict(floor_batch(s, words, chars, labels, device)) for s in predict_batches
            ],
        )
        rows.append(
            {
                "row": "floor-crf" if crf else "floor-softmax",
                "what": "hand-written BiLSTM-" + ("CRF (pytorch-crf)" if crf else "softmax"),
                "epoch_s": seconds,
                "predict_b256_sent_per_s": len(train) / predict,
            }
        )
    return rows


# ---- bistack's BiLSTM-CRF -------------------------------------------------------------------


class TaggingTask:
    """What ``run_epoch`` needs of a recipe: lengths and collated batches of the sentences."""

    def __init__(self, encoded, vocabularies) -> None:
        self.encoded, self.vocabularies = encoded, vocabularies

    def train_lengths(self) -> list[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices):
        return collate_tagging([self.encoded[i] for i in indices], self.vocabularies)


def bistack_tagger(train):
    config = load_config(ROOT / "configs/conll03-bilstm-crf.yaml")
    tags = [convert_tags(t, config.data.scheme) for _, t in train]
    pairs = [(tokens, t) for (tokens, _), t in zip(train, tags, strict=True)]
    vocabularies = TokenVocabularies.build(pairs, min_freq=1, lowercase=True, normalise_digits=True)
    torch.manual_seed(0)
    model = build_tagger(config, vocabularies, singleton_mask(vocabularies, pairs))
    encoded = [vocabularies.encode(tokens, t) for tokens, t in pairs]
    return config, model, vocabularies, encoded


def bistack_training_rows(train, device, precision: str | None) -> tuple[list[dict], object]:
    from lightning_fabric import Fabric

    config, model, vocabularies, encoded = bistack_tagger(train)
    fabric = Fabric(accelerator=device.type, devices=1, precision=precision)
    optimizer = build_optimizer(config.optimizer, model)
    wrapped, optimizer = fabric.setup(model, optimizer)
    task = TaggingTask(encoded, vocabularies)
    lengths = task.train_lengths()

    def epoch(number: int) -> None:
        batches = bucket_batches(lengths, 32, shuffle=True, seed=number, pool=50)
        run_epoch(fabric, wrapped, optimizer, task, batches, 5.0, lambda _: 1.0, "", False)

    epoch(1)  # warm-up
    seconds = timed(device, lambda: epoch(2))
    row = {
        "row": "bistack-train" + (f"-{precision}" if precision else ""),
        "what": "bistack BiLSTM-CRF training epoch (its own loop)"
        + (f", {precision}" if precision else ""),
        "epoch_s": seconds,
    }
    return [row], (config, model, vocabularies, encoded, fabric, wrapped, optimizer, task)


def bistack_prediction_rows(train, device, built) -> list[dict]:
    config, model, vocabularies, *_ = built
    tagger = Tagger(model.to(device), vocabularies, config, "IOB1")
    sentences = [tokens for tokens, _ in train]
    tagger.tag_tokens(sentences[:512], batch_size=256)  # warm-up
    tags = timed(device, lambda: tagger.tag_tokens(sentences, batch_size=256))
    with_confidences = timed(device, lambda: tagger.predict_tokens(sentences, batch_size=256))
    singles = []
    for tokens in sentences[:300]:
        singles.append(timed(device, lambda tokens=tokens: tagger.tag_tokens([tokens])))
    on_cpu = Tagger(copy.deepcopy(model).cpu(), vocabularies, config, "IOB1")
    cpu_singles = []
    with torch_threads(2):  # as on the 2-core machines benchmarks/results/batch1-profile.md used
        for tokens in sentences[:300]:
            cpu_singles.append(timed(torch.device("cpu"), lambda t=tokens: on_cpu.tag_tokens([t])))
    return [
        {
            "row": "bistack-predict-b256",
            "what": "bistack tag_tokens at batch 256 (tags)",
            "predict_b256_sent_per_s": len(sentences) / tags,
        },
        {
            "row": "bistack-predict-confidences-b256",
            "what": "bistack predict_tokens at batch 256 (tags, token and entity confidences)",
            "predict_b256_sent_per_s": len(sentences) / with_confidences,
        },
        {
            "row": "bistack-predict-b1",
            "what": "bistack tag_tokens of one sentence, p50 over 300",
            "p50_ms": 1000 * statistics.median(singles[20:]),
            "cpu_p50_ms": 1000 * statistics.median(cpu_singles[20:]),
        },
        *batch1_profile(tagger, sentences[:50], device),
    ]


def batch1_profile(tagger: Tagger, sentences: list, device) -> list[dict]:
    """Where one sentence's prediction spends its time: operators by host time, and how often
    the host waits for the device."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiled:
        for tokens in sentences:
            tagger.tag_tokens([tokens])
    events = profiled.key_averages()
    waits = sum(e.count for e in events if "Synchronize" in e.key or e.key == "cudaMemcpyAsync")
    launches = sum(e.count for e in events if e.key.startswith("cudaLaunch"))
    table = events.table(sort_by="self_cpu_time_total", row_limit=15)
    return [{"row": "bistack-predict-b1-profile", "sentences": len(sentences),
             "waits_per_sentence": waits / len(sentences),
             "launches_per_sentence": launches / len(sentences), "table": table}]  # fmt: skip


@contextlib.contextmanager
def torch_threads(count: int):
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def profile_rows(device, built) -> list[dict]:
    """The kernels of five bistack training steps, by total device (or CPU) time."""
    from torch.profiler import ProfilerActivity, profile

    _, _, _, _, fabric, wrapped, optimizer, task = built
    lengths = task.train_lengths()
    batches = bucket_batches(lengths, 32, shuffle=True, seed=3, pool=50)[:5]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiled:
        run_epoch(fabric, wrapped, optimizer, task, batches, 5.0, lambda _: 1.0, "", False)
        synchronised(device)()
    key = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    table = profiled.key_averages().table(sort_by=key, row_limit=15)
    launches = sum(e.count for e in profiled.key_averages() if e.key.startswith("cudaLaunch"))
    return [{"row": "bistack-profile", "steps": len(batches), "cuda_launches": launches,
             "table": table}]  # fmt: skip


# ---- the frozen feature cache ---------------------------------------------------------------


def feature_cache_rows(train, backbone_dir: str, device) -> list[dict]:
    from transformers import AutoModel, AutoTokenizer

    from bistack.config.files import build_config
    from bistack.data.conll import Sentence
    from bistack.models.backbone import TransformerBackbone
    from bistack.taggers.config import LayerPoolingTaggerConfig
    from bistack.taggers.layer_recipe import cached_word_states

    sentences = [tokens for tokens, _ in train]
    tokenizer = AutoTokenizer.from_pretrained(backbone_dir)
    encoder = AutoModel.from_pretrained(backbone_dir).to(device).eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))

    def bare() -> None:
        with torch.inference_mode():
            for k in range(0, len(order), 64):
                chosen = [sentences[i] for i in order[k : k + 64]]
                inputs = tokenizer(chosen, is_split_into_words=True, truncation=True,
                                   max_length=128, padding=True, return_tensors="pt")  # fmt: skip
                states = encoder(**inputs.to(device), output_hidden_states=True).hidden_states
                torch.stack(states[1:], -2).half().cpu()

    bare()  # warm-up
    floor = timed(device, bare)
    backbone = TransformerBackbone.load(backbone_dir)
    data = {"kind": "layer_tagger", "data": {"train": "unused"},
            "backbone": {"path": backbone_dir, "batch_size": 64}}  # fmt: skip
    given = [Sentence(tokens, ["O"] * len(tokens)) for tokens in sentences]
    spent = []
    for sentences_now in (given[:256], given):  # a warm-up, then the timed run: new caches
        with tempfile.TemporaryDirectory() as cache:
            data["backbone"]["cache_dir"] = cache
            config = build_config(LayerPoolingTaggerConfig, data, "gpu benchmark")
            spent.append(
                timed(
                    device,
                    lambda c=config, s=sentences_now: cached_word_states(
                        backbone, c, s, print, device
                    ),
                )
            )
    ours = spent[-1]
    return [
        {
            "row": "feature-cache",
            "what": "frozen MiniLM-shaped word states of every training sentence (all layers)",
            "sentences": len(sentences),
            "bistack_s": ours,
            "bare_forward_s": floor,
            "ratio_to_bare": floor / ours,
        }
    ]


# ---- a large encoder, fine-tuned --------------------------------------------------------------


@dataclass
class FineTuning:
    """A layer classifier over a large encoder, set up to train as ``bistack train`` would
    (the recipe's own model, batches and optimizer, on Fabric at ``precision``)."""

    run: Any
    wrapped: Any
    optimizer: Any
    task: Any

    def epoch(self, seed: int, limit: int | None = None) -> None:
        """One pass of the training loop (its first ``limit`` batches)."""
        lengths = self.task.train_lengths()
        batches = bucket_batches(lengths, 16, shuffle=True, seed=seed, pool=50)[:limit]
        fabric = self.run.fabric
        run_epoch(fabric, self.wrapped, self.optimizer, self.task, batches, 1.0, lambda _: 1.0,
                  "", False)  # fmt: skip


def synthetic_table(large_dir: str, texts: int, folder: Path) -> Path:
    """``texts`` rows of 300 random words of the encoder's vocabulary, with random labels."""
    rng = random.Random(0)
    words = (Path(large_dir) / "vocab.txt").read_text(encoding="utf-8").split()
    vocabulary = [w for w in words if w.isalpha() and w.islower()][:5000]
    rows = [
        " ".join(rng.choices(vocabulary, k=300)) + f"\t{rng.randint(0, 1)}" for _ in range(texts)
    ]
    table = folder / "train.tsv"
    table.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    return table


def fine_tuning(
    large_dir: str, table: Path, device, precision: str | None, folder: Path
) -> FineTuning:
    """The large encoder under BiLSTM layer pooling, fine-tuned at 256 subwords, batch 16."""
    from bistack.runs.loop import optimizer_for, start_run
    from bistack.tasks import config_from_dict, task_of

    data = {"train": str(table), "dev": str(table), "text_column": "sentence"}
    config = config_from_dict(
        {
            "kind": "layer_classifier",
            "data": data | {"label_columns": ["label"]},
            "backbone": {"path": large_dir, "finetune": True, "max_length": 256},
            "layer_pooling": {"type": "lstm", "lstm_hidden": 256},
            "optimizer": {"name": "adamw", "lr": 1e-5},
            "train": {"batch_size": 16},
        }
    )
    run = start_run(folder / f"run-{precision}", 1, devices=1, strategy="auto",
                    accelerator=device.type, precision=precision)  # fmt: skip
    prepared = task_of(config.kind).prepare(config, run)
    model = prepared.network
    wrapped, optimizer = run.fabric.setup(model, optimizer_for(run.fabric, config.optimizer, model))
    return FineTuning(run, wrapped, optimizer, prepared.loop)


def large_encoder_rows(large_dir: str, device, texts: int) -> list[dict]:
    """A layer classifier over a BERT-large-shaped encoder, fine-tuned at 256 subwords a text:
    texts per second of the training loop's steps (the recipe's own batches and model, after a
    warm-up epoch; no dev scoring or saving timed), float32 and bf16-mixed."""
    rows = []
    with tempfile.TemporaryDirectory() as work:
        table = synthetic_table(large_dir, texts, Path(work))
        for precision in (None, "bf16-mixed"):
            tuning = fine_tuning(large_dir, table, device, precision, Path(work))
            tuning.epoch(1)  # warm-up
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            seconds = timed(device, lambda tuning=tuning: tuning.epoch(2))
            peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else 0.0
            tuning.run.directory.close()
            rows.append(
                {
                    "row": f"large-finetune-{precision or 'fp32'}",
                    "what": "BERT-large-shaped encoder fine-tuned, 256 subwords, batch 16, "
                    f"{precision or 'float32'}",
                    "texts_per_s": texts / seconds,
                    "peak_gib": peak,
                }
            )
            del tuning
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


# ---- the report ----------------------------------------------------------------------------


def report(rows: list[dict], device, args) -> str:
    by = {row["row"]: row for row in rows}
    lines = [
        "# bistack on a GPU beside hand-written floors",
        "",
        f"Device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}; "
        f"torch {torch.__version__}; Python {platform.python_version()}; "
        f"{args.sentences} CoNLL-2003 training sentences. Reproduce: see the header of "
        "benchmarks/gpu.py.",
        "",
        "| what | bistack | floor | ratio | target |",
        "|---|---:|---:|---:|---|",
    ]

    def line(what, ours, floor, ratio, target):
        lines.append(f"| {what} | {ours} | {floor} | {ratio} | {target} |")

    soft, crf = by["floor-softmax"], by["floor-crf"]
    ours = by["bistack-train"]
    line("BiLSTM-CRF training epoch (s)", f"{ours['epoch_s']:.2f}",
         f"softmax {soft['epoch_s']:.2f}; pytorch-crf {crf['epoch_s']:.2f}",
         f"{ours['epoch_s'] / soft['epoch_s']:.2f}x softmax", "<= 1.5x")  # fmt: skip
    if "bistack-train-bf16-mixed" in by:
        bf16 = by["bistack-train-bf16-mixed"]
        line("the same, bf16-mixed (s)", f"{bf16['epoch_s']:.2f}", "", "", "")
    predicted = by["bistack-predict-b256"]["predict_b256_sent_per_s"]
    line("prediction at batch 256 (sentences/s, tags)", f"{predicted:,.0f}",
         f"softmax {soft['predict_b256_sent_per_s']:,.0f}; "
         f"pytorch-crf {crf['predict_b256_sent_per_s']:,.0f}",
         f"{predicted / soft['predict_b256_sent_per_s']:.2f}x softmax", ">= 0.5x")  # fmt: skip
    confident = by["bistack-predict-confidences-b256"]["predict_b256_sent_per_s"]
    line("the same with token and entity confidences", f"{confident:,.0f}", "", "", "")
    single = by["bistack-predict-b1"]
    line("prediction of one sentence, p50 (ms)", f"{single['p50_ms']:.2f}",
         f"the same model on 2 CPU threads {single['cpu_p50_ms']:.2f}",
         f"{single['p50_ms'] / single['cpu_p50_ms']:.2f}x", "<= 1x the CPU's")  # fmt: skip
    if "feature-cache" in by:
        cache = by["feature-cache"]
        line("frozen feature cache (s)", f"{cache['bistack_s']:.2f}",
             f"bare forward {cache['bare_forward_s']:.2f}", f"{cache['ratio_to_bare']:.2f}x",
             ">= 0.5x")  # fmt: skip
    if "large-finetune-fp32" in by:
        fp32, bf16 = by["large-finetune-fp32"], by["large-finetune-bf16-mixed"]
        line("BERT-large-shaped fine-tuning (texts/s)",
             f"bf16 {bf16['texts_per_s']:.1f} ({bf16['peak_gib']:.1f} GiB)",
             f"fp32 {fp32['texts_per_s']:.1f} ({fp32['peak_gib']:.1f} GiB)",
             f"{bf16['texts_per_s'] / fp32['texts_per_s']:.2f}x", ">= 3x")  # fmt: skip
    single_profile = by.get("bistack-predict-b1-profile")
    if single_profile:
        waits = single_profile["waits_per_sentence"]
        launches = single_profile["launches_per_sentence"]
        lines += ["", f"## One sentence's prediction ({waits:.1f} waits for the device and "
                  f"{launches:.0f} kernel launches a sentence)", "", "```",
                  single_profile["table"], "```"]  # fmt: skip
    profile = by.get("bistack-profile")
    if profile:
        lines += ["", f"## Where a training step's time goes ({profile['steps']} steps, "
                  f"{profile['cuda_launches']} kernel launches)", "", "```",
                  profile["table"], "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--backbone", help="MiniLM-shaped HuggingFace folder (feature cache)")
    parser.add_argument("--large", help="BERT-large-shaped HuggingFace folder (fine-tuning)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=int, help="at most this many training sentences")
    parser.add_argument("--large-texts", type=int, default=512)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # what bistack's commands set on a GPU
    train = [(s.tokens, s.tags) for s in read_conll(args.train)][: args.limit]
    args.sentences = len(train)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def add(new: list[dict]) -> None:
        """Keep each section's rows as soon as they are measured (a run cut short keeps them)."""
        rows.extend(new)
        for row in new:
            print(json.dumps(row)[:400], flush=True)
        (out / "gpu.json").write_text(json.dumps(rows, indent=1) + "\n")

    add(floor_rows(train, device))
    for precision in (None, "bf16-mixed"):
        trained, built = bistack_training_rows(train, device, precision)
        add(trained)
        if precision is None:
            add(bistack_prediction_rows(train, device, built))
            add(profile_rows(device, built))
    if args.backbone:
        add(feature_cache_rows(train, args.backbone, device))
    if args.large:
        add(large_encoder_rows(args.large, device, args.large_texts))
    text = report(rows, device, args)
    (out / "gpu.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
