"""Train a sequence tagger: our own readable loop, driven by Lightning Fabric.

Fabric gives devices, precision and distributed training (``--devices 2 --strategy ddp``) without
changing this loop. Each epoch ends with a dev evaluation; the best model so far is written
atomically, so Ctrl-C or a crash leaves it intact and loadable.
"""

from __future__ import annotations

import csv
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning_fabric import Fabric
from tqdm import tqdm

from bistack.api import Tagger, check_known_types
from bistack.config import TaggerConfig
from bistack.data.batching import bucket_batches, collate_tagging
from bistack.data.conll import Sentence, read_conll
from bistack.data.features import TokenVocabularies
from bistack.data.pretrained import load_vectors
from bistack.metrics.entities import EntityScores
from bistack.modeldir import save_weights
from bistack.models.tagger import SequenceTagger, build_tagger
from bistack.schemes import convert_tags, detect_scheme


@dataclass
class TaggingData:
    """Training and dev sentences (tags in the input scheme) and that scheme."""

    train: list[Sentence]
    dev: list[Sentence]
    input_scheme: str
    dev_source: str


def load_tagging_data(config: TaggerConfig) -> TaggingData:
    """Read train and dev; without a dev file, split off a fixed fraction of train."""
    data = config.data
    train = read_conll(data.train, data.token_column, data.tag_column)
    if data.dev:
        dev, dev_source = read_conll(data.dev, data.token_column, data.tag_column), data.dev
    else:
        shuffled = list(train)
        random.Random(data.split_seed).shuffle(shuffled)
        cut = max(1, round(len(shuffled) * data.dev_fraction))
        dev, train = shuffled[:cut], shuffled[cut:]
        dev_source = f"{data.train} (held-out {data.dev_fraction:.0%})"
    return TaggingData(train, dev, detect_scheme([s.tags for s in train]), dev_source)


def build_optimizer(config: TaggerConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    options = config.optimizer
    if options.name == "sgd":
        return torch.optim.SGD(
            model.parameters(),
            lr=options.lr,
            momentum=options.momentum,
            weight_decay=options.weight_decay,
        )
    optimizer_class = torch.optim.Adam if options.name == "adam" else torch.optim.AdamW
    return optimizer_class(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)


def initialise_words(
    tagger: SequenceTagger, config: TaggerConfig, vocabularies: TokenVocabularies
) -> str:
    """Copy pretrained vectors into the word embedding; returns a coverage line to print."""
    path = config.features.pretrained
    if not path:
        return "word embeddings: trained from scratch"
    vectors, found = load_vectors(path, vocabularies.words, config.features.word_dim)
    with torch.no_grad():
        tagger.embedder.word_embedding.weight[found] = vectors[found]
    total = len(vocabularies.words) - 2
    coverage = float(found.sum()) / max(total, 1)
    return f"word embeddings: {int(found.sum())}/{total} words ({coverage:.1%}) from {path}"


class MetricsLog:
    """metrics.csv, one row per epoch, plus TensorBoard when it is installed."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "metrics.csv"
        self.path.unlink(missing_ok=True)
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional
            self.tensorboard = None
        else:
            self.tensorboard = SummaryWriter(str(directory / "tensorboard"))

    def write(self, row: dict[str, float]) -> None:
        new = not self.path.exists()
        with self.path.open("a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self.tensorboard is not None:
            for key, value in row.items():
                if key != "epoch":
                    self.tensorboard.add_scalar(key, value, int(row["epoch"]))
            self.tensorboard.flush()


def train_tagger(
    config: TaggerConfig,
    output: str | Path,
    *,
    devices: int | str = 1,
    strategy: str = "auto",
    accelerator: str = "cpu",
    progress: bool = True,
) -> Path:
    """Train as ``config`` says; the best model goes to ``output/model``. Returns that path."""
    fabric = Fabric(accelerator=accelerator, devices=devices, strategy=strategy)
    fabric.launch()
    fabric.seed_everything(config.train.seed, verbose=False)

    def say(message: str) -> None:
        fabric.print(message, flush=True)

    output = Path(output)
    model_dir = output / "model"

    data = load_tagging_data(config)
    training_pairs = [(s.tokens, convert_tags(s.tags, config.data.scheme)) for s in data.train]
    vocabularies = TokenVocabularies.build(
        training_pairs,
        min_freq=config.features.min_freq,
        lowercase=config.features.lowercase,
        normalise_digits=config.features.normalise_digits,
    )
    check_known_types(data.dev, vocabularies, data.dev_source)
    encoded = [vocabularies.encode(tokens, tags) for tokens, tags in training_pairs]
    model = build_tagger(config, vocabularies)
    model.embedder.singletons = singleton_mask(vocabularies, training_pairs)
    say(initialise_words(model, config, vocabularies))
    tagger = Tagger(model, vocabularies, config, data.input_scheme)
    parameters = sum(p.numel() for p in model.parameters())
    say(
        f"train: {len(data.train)} sentences ({data.input_scheme}, "
        f"trained as {config.data.scheme}); "
        f"dev: {len(data.dev)} from {data.dev_source}; {len(vocabularies.words)} words, "
        f"{len(vocabularies.chars)} chars, {len(vocabularies.tags)} tags; {parameters:,} parameters"
    )
    if fabric.is_global_zero:
        tagger.save_metadata(model_dir)
    log = MetricsLog(output) if fabric.is_global_zero else None

    optimizer = build_optimizer(config, model)
    wrapped, optimizer = fabric.setup(model, optimizer)
    base_lr = config.optimizer.lr
    best_f1, best_epoch, stale = -1.0, 0, 0
    started = time.monotonic()
    try:
        for epoch in range(1, config.train.max_epochs + 1):
            for group in optimizer.param_groups:
                group["lr"] = base_lr / (1 + config.optimizer.lr_decay * (epoch - 1))
            batches = bucket_batches(
                [len(e.words) for e in encoded],
                config.train.batch_size,
                shuffle=True,
                seed=config.train.seed * 1000 + epoch,
            )
            # Every process takes the same number of batches, so DDP steps stay in lockstep.
            per_rank = len(batches) // fabric.world_size
            mine = batches[fabric.global_rank :: fabric.world_size][:per_rank]
            epoch_loss = run_epoch(
                fabric,
                wrapped,
                optimizer,
                mine,
                encoded,
                vocabularies,
                config,
                f"epoch {epoch}/{config.train.max_epochs}",
                progress and fabric.is_global_zero,
                best_f1,
            )
            scores = tagger.score(data.dev, data.dev_source)
            improved = scores.micro.f1 > best_f1
            if improved:
                best_f1, best_epoch, stale = scores.micro.f1, epoch, 0
                if fabric.is_global_zero:
                    save_weights(model_dir, model)
            else:
                stale += 1
            elapsed = time.monotonic() - started
            say(
                f"epoch {epoch}: loss {epoch_loss:.4f}  dev P {scores.micro.precision:.2f} "
                f"R {scores.micro.recall:.2f} F1 {scores.micro.f1:.2f}"
                f"{'  (best, saved)' if improved else ''}  [{elapsed:.0f}s]"
            )
            if log is not None:
                log.write(epoch_row(epoch, epoch_loss, scores, optimizer, elapsed))
            out_of_time = (
                config.train.max_minutes is not None and elapsed > config.train.max_minutes * 60
            )
            if fabric.broadcast(stale >= config.train.patience or out_of_time):
                say(
                    f"stopping after epoch {epoch}: "
                    f"{'time budget reached' if out_of_time else 'no dev improvement'}"
                )
                break
    except KeyboardInterrupt:
        say(
            f"\ninterrupted: the best model so far (dev F1 {best_f1:.2f}, epoch {best_epoch}) "
            f"is intact in {model_dir}"
        )
        raise
    say(f"best dev F1 {best_f1:.2f} at epoch {best_epoch}; model in {model_dir}")
    return model_dir


def run_epoch(
    fabric: Fabric,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: list[list[int]],
    encoded: list,
    vocabularies: TokenVocabularies,
    config: TaggerConfig,
    description: str,
    show: bool,
    best_f1: float,
) -> float:
    """One pass over ``batches``; returns the mean training loss."""
    model.train()
    total, count = 0.0, 0
    bar = tqdm(batches, desc=description, disable=not show, leave=False, dynamic_ncols=True)
    for indices in bar:
        batch = collate_tagging([encoded[i] for i in indices], vocabularies).to(fabric.device)
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch)  # (), mean loss per real token
        fabric.backward(loss)
        if config.optimizer.grad_clip > 0:
            fabric.clip_gradients(model, optimizer, max_norm=config.optimizer.grad_clip)
        optimizer.step()
        total += loss.item()
        count += 1
        if count % 20 == 0:
            bar.set_postfix(loss=f"{total / count:.4f}", best_dev_f1=f"{max(best_f1, 0):.2f}")
    return total / max(count, 1)


def singleton_mask(vocabularies: TokenVocabularies, pairs: list) -> torch.Tensor:
    """``(num_words,)`` bool: words seen exactly once in training (candidates for <unk>)."""
    counts = torch.zeros(len(vocabularies.words), dtype=torch.long)
    for tokens, _ in pairs:
        for token in tokens:
            counts[vocabularies.words.lookup(vocabularies.key(token))] += 1
    mask = counts == 1
    mask[:2] = False
    return mask


def epoch_row(
    epoch: int, loss: float, scores: EntityScores, optimizer: torch.optim.Optimizer, elapsed: float
) -> dict[str, float]:
    return {
        "epoch": epoch,
        "train_loss": loss,
        "dev_precision": scores.micro.precision,
        "dev_recall": scores.micro.recall,
        "dev_f1": scores.micro.f1,
        "dev_token_accuracy": scores.token_accuracy,
        "lr": optimizer.param_groups[0]["lr"],
        "seconds": round(elapsed, 1),
    }
