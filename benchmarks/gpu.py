"""bistack on a GPU beside hand-written floors doing the same work, in one process.

Every row times the same stages on both sides (``benchmarks/timed.py``: one warm-up call, 3
timed calls, median and spread; the same optimizer kind), against two floors where the host
matters:

- the *device floor*: batches prebuilt on the device before the timer, on both sides (what the
  hardware allows), its CRF the parallel scan kernels called directly with the paths read as
  whole tensors (pytorch-crf, with one device read a token in its back-trace, is a row of its
  own: what users write, not a floor);
- the *from-tokens floor*: a competent hand-written pipeline from strings (ids, vectorised
  collation, a copy to the device) inside the timer, as bistack's own.

On CoNLL-2003 at the sizes of configs/conll03-bilstm-crf.yaml (word 100 + char BiLSTM 25 +
casing 10, BiLSTM 200, CRF, batch 32): a training epoch against each floor, prediction of tags
at batch 256 against each floor, with confidences (bistack alone: the floor has none; once as a
CRF tagger decodes them on the device, once on the host), and one sentence at a time (p50). The
frozen feature cache of a MiniLM-shaped encoder against its bare
forward writing the same file; a BERT-large-shaped encoder fine-tuned under LSTM layer pooling
against a plain PyTorch + transformers loop (the recipe's parameter groups, the same fused or
foreach AdamW, batches pre-tokenised and pinned), at batch 16 and 64, float32 and bf16-mixed;
with ``--compile``, bistack's bf16 batch-16 row again with ``train.compile`` (compiling costs
minutes on a CPU, so the suite leaves it out).

  python benchmarks/gpu.py --train T.txt --backbone MINILM_DIR --large LARGE_DIR \\
      [--compile] [--device cuda] [--limit N] [--out benchmarks/results]

Writes gpu.md and gpu.json in --out. ``--device cpu`` with a small ``--limit`` runs every row
on the CPU: the suite runs it so, and checks every comparison's two timers hold the same
stages (tests/benchmarks/test_gpu_benchmark.py).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bistack.data.batching import collate_tagging
from bistack.data.buckets import bucket_batches
from bistack.data.conll import read_conll
from bistack.data.features import TokenVocabularies
from bistack.encoders import Packing
from bistack.kernels import crf_choice
from bistack.kernels.crf_scan import log_partition_scan, viterbi_scan
from bistack.runs.epoch import EpochPlan, run_epoch
from bistack.runs.optimizers import build_optimizer
from bistack.runs.vocabularies import singleton_mask
from bistack.schemes import convert_tags
from bistack.taggers.models.tagger import Tagger
from bistack.taggers.networks.network import build_tagger
from bistack.tasks import config_from_dict, read_config_file
from timed import Comparison, Side, mark, measure_interleaved, synchronised, unwrapped

ROOT = Path(__file__).resolve().parent.parent
Sentences = list[tuple[list[str], list[str]]]

# ---- the floor: the BiLSTM-CRF hand-written --------------------------------------------------


class Floor(nn.Module):
    """word 100 + char BiLSTM 25 + casing 10 -> packed BiLSTM 200 -> a linear-chain CRF. The
    hardware's floor by default: the CRF's log Z and best paths by the parallel scan kernels
    called directly (``bistack.kernels.crf_scan``), the gold score and the paths read as whole
    tensors (one copy to the host a batch); with ``users_crf``, pytorch-crf, as users write it
    (its loss loops over positions in Python, its Viterbi back-trace reads one ``.item()`` a
    token): a row of its own, not the floor the targets are held to. With ``softmax``, no CRF:
    each token's tag by itself (cross-entropy over real tokens, the argmax), the floor of the
    encoder alone. With ``singletons`` (``(words,)`` bool), words seen once in training are
    read as unknown with probability ``unk_replace`` while training, as the recipe does."""

    def __init__(
        self,
        words: int,
        chars: int,
        tags: int,
        users_crf: bool = False,
        softmax: bool = False,
        singletons: torch.Tensor | None = None,
        unk_replace: float = 0.0,
    ) -> None:
        super().__init__()
        self.register_buffer("singletons", singletons)
        self.unk_replace = unk_replace
        self.w = nn.Embedding(words, 100, padding_idx=0)
        self.c = nn.Embedding(chars, 25, padding_idx=0)
        self.k = nn.Embedding(4, 10)
        self.clstm = nn.LSTM(25, 25, batch_first=True, bidirectional=True)
        self.lstm = nn.LSTM(160, 200, batch_first=True, bidirectional=True)
        self.out = nn.Linear(400, tags)
        self.drop = nn.Dropout(0.5)
        self.softmax = softmax
        if users_crf:
            from torchcrf import CRF

            self.crf: nn.Module | None = CRF(tags, batch_first=True)
        elif softmax:
            self.crf = None
        else:
            self.crf = None
            self.transitions = nn.Parameter(torch.empty(tags, tags).uniform_(-0.1, 0.1))
            self.start = nn.Parameter(torch.empty(tags).uniform_(-0.1, 0.1))
            self.end = nn.Parameter(torch.empty(tags).uniform_(-0.1, 0.1))

    def emissions(self, batch: dict) -> torch.Tensor:
        """Packed as a GPU should pack: sorted on the host, the order sent without waiting
        (torch's ``enforce_sorted=False`` copies it blocking and reads its inverse back)."""
        words = batch["words"]
        if self.training and self.singletons is not None:
            rare = torch.rand(words.shape, device=words.device) < self.unk_replace
            words = words.masked_fill(self.singletons[words] & rare, 1)  # 1 is unknown
        chars = Packing.of(batch["char_lengths"], words.device)
        embedded = self.c(batch["chars"]).index_select(0, chars.order)
        _, (h, _) = self.clstm(pack_padded_sequence(embedded, chars.ranked, batch_first=True))
        spelled = torch.cat([h[0], h[1]], -1).index_select(0, chars.restore)  # (tokens, 50)
        width = words.size(1)
        placed = torch.zeros(words.numel(), 50, device=words.device)  # each token at its place
        placed = placed.index_copy(0, batch["token_places"], spelled).view(*words.shape, 50)
        x = self.drop(torch.cat([self.w(words), placed, self.k(batch["casing"])], -1))
        order = Packing.of(batch["lengths"], words.device)
        packed = pack_padded_sequence(x.index_select(0, order.order), order.ranked, True)
        out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=width)
        return self.out(self.drop(out.index_select(0, order.restore)))

    def loss(self, batch: dict) -> torch.Tensor:
        emissions = self.emissions(batch)
        if self.crf is not None:
            return -self.crf(emissions, batch["tags"], batch["mask"], reduction="mean")
        tags, mask = batch["tags"], batch["mask"]
        if self.softmax:  # mean over real tokens, padding weighted 0 (no boolean indexing)
            each = nn.functional.cross_entropy(
                emissions.flatten(0, 1).float(), tags.flatten(), reduction="none"
            )
            return (each * mask.flatten()).sum() / mask.sum()
        moves = (self.transitions, self.start, self.end)
        log_z = log_partition_scan(emissions, mask, *moves)
        emitted = emissions.float().gather(2, tags.unsqueeze(2)).squeeze(2) * mask
        stepped = self.transitions[tags[:, :-1], tags[:, 1:]] * mask[:, 1:]
        last = tags.gather(1, (mask.sum(1, keepdim=True) - 1)).squeeze(1)
        gold = emitted.sum(1) + stepped.sum(1) + self.start[tags[:, 0]] + self.end[last]
        return (log_z - gold).mean()

    @torch.no_grad()
    def predict(self, batch: dict) -> list[list[int]]:
        emissions = self.emissions(batch)
        if self.crf is not None:
            return self.crf.decode(emissions, batch["mask"])
        if self.softmax:
            best = emissions.argmax(-1).cpu().tolist()  # the batch's one copy to the host
            return [row[:n] for row, n in zip(best, batch["lengths"].tolist(), strict=True)]
        paths, _ = viterbi_scan(emissions, batch["mask"], self.transitions, self.start, self.end)
        host = paths.cpu().tolist()  # the batch's one copy to the host
        return [row[:n] for row, n in zip(host, batch["lengths"].tolist(), strict=True)]


def casing_class(token: str) -> int:
    return 1 if token.isupper() else 2 if token[:1].isupper() else 3 if token.isdigit() else 0


class FloorVocabulary:
    """The floor's ids: lowercased words, characters, tags."""

    def __init__(self, train: Sentences) -> None:
        self.words = {
            w: i + 2 for i, w in enumerate(sorted({t.lower() for s, _ in train for t in s}))
        }
        self.chars = {
            c: i + 1 for i, c in enumerate(sorted({c for s, _ in train for t in s for c in t}))
        }
        self.tags = {t: i for i, t in enumerate(sorted({t for _, tags in train for t in tags}))}
        seen = collections.Counter(t.lower() for s, _ in train for t in s)
        self.singletons = torch.zeros(len(self.words) + 2, dtype=torch.bool)
        self.singletons[[i for w, i in self.words.items() if seen[w] == 1]] = True


@mark("strings to ids")
def floor_encode(sentences: Sentences, vocabulary: FloorVocabulary) -> list[tuple]:
    """Each sentence's word, casing, tag and char ids."""
    words, chars, tags = vocabulary.words, vocabulary.chars, vocabulary.tags
    return [
        (
            [words.get(t.lower(), 1) for t in tokens],
            [casing_class(t) for t in tokens],
            [tags.get(t, 0) for t in gold],
            [[chars.get(c, 0) for c in t] for t in tokens],
        )
        for tokens, gold in sentences
    ]


def _padded(rows: Sequence[Sequence[int]], width: int) -> np.ndarray:
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


@mark("collation")
def floor_collate(encoded: Sequence[tuple], device: torch.device) -> dict:
    """Padded tensors of encoded sentences, built in numpy, pinned on a GPU, copied without
    waiting: the competent hand-written collation."""
    lengths = [len(e[0]) for e in encoded]
    width = max(lengths)
    spelled = [c for e in encoded for c in e[3]]
    arrays = {
        "words": _padded([e[0] for e in encoded], width),
        "casing": _padded([e[1] for e in encoded], width),
        "tags": _padded([e[2] for e in encoded], width),
        "chars": _padded(spelled, max(map(len, spelled))),
    }
    # Each token's place in the flattened (batch, width) grid, where its char state goes.
    arrays["token_places"] = np.concatenate(
        [i * width + np.arange(n) for i, n in enumerate(lengths)]
    )
    batch = {k: torch.from_numpy(v) for k, v in arrays.items()}
    if device.type == "cuda":
        batch = {k: v.pin_memory() for k, v in batch.items()}
    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    batch["mask"] = batch["words"] > 0
    batch["lengths"] = torch.tensor(lengths)  # packing reads them on the host
    batch["char_lengths"] = torch.tensor([len(c) for c in spelled])
    return batch


# ---- the BiLSTM-CRF: training epochs and prediction --------------------------------------------


class TaggingTask:
    """What ``run_epoch`` needs of a recipe: lengths and collated batches of the sentences."""

    def __init__(self, encoded: list, vocabularies: TokenVocabularies) -> None:
        self.encoded, self.vocabularies = encoded, vocabularies

    def train_lengths(self) -> list[int]:
        return [len(e.words) for e in self.encoded]

    def collate(self, indices: list[int]) -> Any:
        return collate_tagging([self.encoded[i] for i in indices], self.vocabularies)


class PrebuiltTask(TaggingTask):
    """The same batches, collated on the device before the timer (the device floor's terms)."""

    def __init__(self, task: TaggingTask, batches: list[list[int]], device: torch.device) -> None:
        super().__init__(task.encoded, task.vocabularies)
        self.ready = {tuple(b): task.collate(b).to(device) for b in batches}

    def collate(self, indices: list[int]) -> Any:
        return self.ready[tuple(indices)]


@dataclass
class RecipeTagger:
    """The recipe's tagger set up for the rows: its config, sentences (in its scheme),
    vocabularies, network (and as Fabric wraps it), optimizer, and the training batches, also
    prebuilt on the device."""

    config: Any
    pairs: Sentences
    vocabularies: TokenVocabularies
    model: Any
    fabric: Any
    wrapped: Any
    optimizer: Any
    task: TaggingTask
    batches: list[list[int]]
    prebuilt: PrebuiltTask


def recipe_tagger(
    train: Sentences, device: torch.device, precision: str | None, head: str | None = None
) -> RecipeTagger:
    """The recipe's model settings alone (``head``: another head type): the sentences are the
    caller's (its data path unread, so that the rows run wherever the recipe's data file is
    not)."""
    from lightning_fabric import Fabric

    recipe = ROOT / "configs/conll03-bilstm-crf.yaml"
    data = read_config_file(recipe)
    if head is not None:
        data["head"] = {**data.get("head", {}), "type": head}
    config = config_from_dict(data, source=str(recipe))
    pairs = [(tokens, convert_tags(tags, config.data.scheme)) for tokens, tags in train]
    vocabularies = TokenVocabularies.build(pairs, min_freq=1, lowercase=True, normalise_digits=True)
    torch.manual_seed(0)
    model = build_tagger(config, vocabularies, singleton_mask(vocabularies, pairs))
    fabric = Fabric(accelerator=device.type, devices=1, precision=precision)  # type: ignore[arg-type]
    optimizer = build_optimizer(config.optimizer, model)
    wrapped, optimizer = fabric.setup(model, optimizer)
    task = TaggingTask([vocabularies.encode(t, g) for t, g in pairs], vocabularies)
    batches = bucket_batches(task.train_lengths(), 32, shuffle=True, seed=1, pool=50)
    prebuilt = PrebuiltTask(task, batches, device)
    return RecipeTagger(
        config, pairs, vocabularies, model, fabric, wrapped, optimizer, task, batches, prebuilt
    )


def tagger_comparisons(train: Sentences, device: torch.device, precision: str | None) -> list:
    """Training epochs against both floors, and prediction at batch 256 against both."""
    built = recipe_tagger(train, device, precision)
    config, pairs, vocabularies, model = built.config, built.pairs, built.vocabularies, built.model
    fabric, wrapped, optimizer = built.fabric, built.wrapped, built.optimizer
    task, batches, prebuilt = built.task, built.batches, built.prebuilt

    floor_vocabulary = FloorVocabulary(pairs)
    torch.manual_seed(0)
    floor = Floor(
        len(floor_vocabulary.words) + 2,
        len(floor_vocabulary.chars) + 1,
        len(floor_vocabulary.tags),
        singletons=floor_vocabulary.singletons,
        unk_replace=config.features.unk_replace,
    ).to(device)
    floor_optimizer = same_kind(optimizer, floor.parameters(), lr=config.optimizer.lr)
    torch.manual_seed(0)
    users = Floor(*(floor.w.num_embeddings, floor.c.num_embeddings, floor.out.out_features),
                  users_crf=True, singletons=floor_vocabulary.singletons,
                  unk_replace=config.features.unk_replace).to(device)  # fmt: skip
    users_optimizer = same_kind(optimizer, users.parameters(), lr=config.optimizer.lr)
    encoded = floor_encode(pairs, floor_vocabulary)
    floor_ready = [floor_collate([encoded[i] for i in b], device) for b in batches]
    autocast = fabric.autocast

    def floor_step(batch: dict, net: Floor = floor, step: Any = floor_optimizer) -> None:
        step.zero_grad(set_to_none=True)
        with autocast():
            loss = net.loss(batch)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), config.optimizer.grad_clip)
        step.step()

    def floor_epoch_on_device() -> None:
        floor.train()
        for batch in floor_ready:
            floor_step(batch)

    def users_epoch_on_device() -> None:
        users.train()
        for batch in floor_ready:
            floor_step(batch, users, users_optimizer)

    def floor_epoch_from_ids() -> None:
        floor.train()
        for b in batches:
            floor_step(floor_collate([encoded[i] for i in b], device))

    def ours_epoch(on: TaggingTask) -> Callable[[], None]:
        grad_clip = config.optimizer.grad_clip
        return lambda: run_epoch(fabric, wrapped, optimizer, on, batches, EpochPlan(grad_clip))

    suffix = f", {precision}" if precision else ""
    rows = [
        Comparison(
            f"train-device{suffix}",
            f"BiLSTM-CRF training epoch, batches prebuilt on the device{suffix}",
            Side("bistack run_epoch", ours_epoch(prebuilt), optimizer),
            Side("hand-written loop", floor_epoch_on_device, floor_optimizer),
            per=len(train),
        ),
        Comparison(
            f"train-from-ids{suffix}",
            f"BiLSTM-CRF training epoch, collated in the timer{suffix}",
            Side("bistack run_epoch", ours_epoch(task), optimizer),
            Side("hand-written loop", floor_epoch_from_ids, floor_optimizer),
            per=len(train),
        ),
    ]
    if precision is not None:
        return rows
    tagger = Tagger(model, vocabularies, config, "IOB1")
    tokens = [t for t, _ in pairs]
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
    chunks = [order[k : k + 256] for k in range(0, len(order), 256)]
    decoder = model.head.decoder()
    ours_device = {tuple(c): prebuilt_batch(task, c, device) for c in chunks}
    floor_device = [floor_collate([encoded[i] for i in c], device) for c in chunks]

    def ours_from_tokens() -> None:
        tagger.tag_tokens(tokens, batch_size=256)

    def floor_from_tokens() -> None:
        floor.eval()
        for c in chunks:
            floor.predict(
                floor_collate(floor_encode([pairs[i] for i in c], floor_vocabulary), device)
            )

    def ours_on_device() -> None:
        model.eval()
        with torch.inference_mode():
            for batch in ours_device.values():
                emissions = model.emissions(batch).float().cpu().numpy()
                decoder.analyse(emissions, batch.lengths.tolist(), confidence=False)

    def floor_on_device(net: Floor = floor) -> None:
        net.eval()
        for batch in floor_device:
            net.predict(batch)

    singles = tokens[:100]
    single_times: dict[str, list[float]] = {"bistack": [], "floor": []}

    def one_at_a_time(name: str, predict: Callable[[Any], object]) -> Callable[[], None]:
        sync = synchronised(device)

        def work() -> None:
            single_times[name].clear()
            for sentence in singles:
                start = time.perf_counter()
                predict(sentence)
                sync()
                single_times[name].append(time.perf_counter() - start)

        return work

    floor_index = {tuple(t): i for i, t in enumerate(tokens)}
    return [
        *rows,
        Comparison(
            "predict-from-tokens",
            "tags at batch 256, from tokens",
            Side("bistack tag_tokens", ours_from_tokens),
            Side("hand-written", floor_from_tokens),
            per=len(train),
        ),
        Comparison(
            "predict-device",
            "tags at batch 256, batches prebuilt on the device",
            Side("bistack network + decoder", ours_on_device),
            Side("hand-written", floor_on_device),
            per=len(train),
        ),
        Comparison(
            "train-device, pytorch-crf",
            "BiLSTM-CRF training epoch, batches prebuilt on the device, against pytorch-crf "
            "(what users write: not the floor)",
            Side("bistack run_epoch", ours_epoch(prebuilt), optimizer),
            Side("pytorch-crf loop", users_epoch_on_device, users_optimizer),
            per=len(train),
        ),
        Comparison(
            "predict-device, pytorch-crf",
            "tags at batch 256, batches prebuilt on the device, against pytorch-crf (what users "
            "write: one device read a token)",
            Side("bistack network + decoder", ours_on_device),
            Side("pytorch-crf", lambda: floor_on_device(users)),
            per=len(train),
        ),
        Comparison(
            "predict-one",
            "tags of one sentence at a time, from tokens",
            Side("bistack tag_tokens", one_at_a_time("bistack", lambda s: tagger.tag_tokens([s]))),
            Side(
                "hand-written",
                one_at_a_time(
                    "floor",
                    lambda s: floor.predict(
                        floor_collate(
                            floor_encode([pairs[floor_index[tuple(s)]]], floor_vocabulary), device
                        )
                    ),
                ),
            ),
            per=len(singles),
            extra={"times": single_times},
        ),
        Comparison(
            "predict-confidences",
            "tags, token and entity confidences at batch 256",
            Side("bistack predict_tokens", lambda: tagger.predict_tokens(tokens, batch_size=256)),
            Side("hand-written tags alone", floor_from_tokens),
            per=len(train),
            extra={"stages_differ": "the floor computes no confidences"},
        ),
        Comparison(
            "predict-confidences-host",
            "tags, token and entity confidences at batch 256, decoded on the host",
            Side("bistack predict_tokens", lambda: on_the_host(tagger, tokens)),
            Side("hand-written tags alone", floor_from_tokens),
            per=len(train),
            extra={"stages_differ": "the floor computes no confidences"},
        ),
    ]


def on_the_host(tagger: Tagger, tokens: list[list[str]]) -> None:
    """``predict_tokens`` at batch 256 with every batch decoded on the host (on a GPU a CRF
    tagger computes the confidences of a large batch on the device): the two rows weigh the
    two ways against one floor."""
    tagger.device_rows = sys.maxsize
    try:
        tagger.predict_tokens(tokens, batch_size=256)
    finally:
        del tagger.device_rows  # the class's own again


def softmax_comparisons(train: Sentences, device: torch.device) -> list:
    """The encoder alone: the recipe's tagger with a softmax head against the floor's, a
    training epoch and tags at batch 256, batches prebuilt on the device."""
    built = recipe_tagger(train, device, None, head="softmax")
    config, pairs, model, fabric = built.config, built.pairs, built.model, built.fabric
    wrapped, optimizer, task = built.wrapped, built.optimizer, built.task
    batches, prebuilt = built.batches, built.prebuilt
    vocabulary = FloorVocabulary(pairs)
    sizes = (len(vocabulary.words) + 2, len(vocabulary.chars) + 1, len(vocabulary.tags))
    torch.manual_seed(0)
    floor = Floor(
        *sizes,
        softmax=True,
        singletons=vocabulary.singletons,
        unk_replace=config.features.unk_replace,
    ).to(device)
    floor_optimizer = same_kind(optimizer, floor.parameters(), lr=config.optimizer.lr)
    encoded = floor_encode(pairs, vocabulary)
    floor_ready = [floor_collate([encoded[i] for i in b], device) for b in batches]
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]))
    chunks = [order[k : k + 256] for k in range(0, len(order), 256)]
    ours_device = [prebuilt_batch(task, c, device) for c in chunks]
    floor_device = [floor_collate([encoded[i] for i in c], device) for c in chunks]
    decoder, grad_clip = model.head.decoder(), config.optimizer.grad_clip

    def floor_epoch() -> None:
        floor.train()
        for batch in floor_ready:
            floor_optimizer.zero_grad(set_to_none=True)
            floor.loss(batch).backward()
            nn.utils.clip_grad_norm_(floor.parameters(), grad_clip)
            floor_optimizer.step()

    def ours_tags() -> None:
        model.eval()
        with torch.inference_mode():
            for batch in ours_device:
                emissions = model.emissions(batch).float().cpu().numpy()
                decoder.analyse(emissions, batch.lengths.tolist(), confidence=False)

    def floor_tags() -> None:
        floor.eval()
        with torch.no_grad():
            for batch in floor_device:
                floor.predict(batch)

    return [
        Comparison(
            "train-device, softmax head",
            "BiLSTM tagger with a softmax head, training epoch, batches prebuilt on the device",
            Side(
                "bistack run_epoch",
                lambda: run_epoch(
                    fabric, wrapped, optimizer, prebuilt, batches, EpochPlan(grad_clip)
                ),
                optimizer,
            ),
            Side("hand-written loop", floor_epoch, floor_optimizer),
            per=len(train),
        ),
        Comparison(
            "predict-device, softmax head",
            "BiLSTM tagger with a softmax head, tags at batch 256, batches prebuilt on the device",
            Side("bistack network + decoder", ours_tags),
            Side("hand-written", floor_tags),
            per=len(train),
        ),
    ]


@mark("decoding")
def loop_viterbi(crf: Any, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The field's usual Viterbi: a loop over positions with a max a step, then the backtrace;
    each sentence's best path ``(sentences, positions)`` on the emissions' device."""
    width = emissions.shape[1]
    score, pointers = crf.start_transitions + emissions[:, 0], []
    for position in range(1, width):
        best, came = (score[:, :, None] + crf.transitions[None]).max(dim=1)
        score = torch.where(mask[:, position, None], best + emissions[:, position], score)
        pointers.append(came)
    tag = (score + crf.end_transitions).argmax(dim=1)
    path = [tag]
    for position in range(width - 1, 0, -1):
        back = pointers[position - 1].gather(1, tag[:, None]).squeeze(1)
        tag = torch.where(mask[:, position], back, tag)
        path.append(tag)
    return torch.stack(path[::-1], dim=1)


# A small tag set (BIO over 4 types), CoNLL-2003's BIOES tags, a middle one, and a large one
# (OntoNotes-sized, BIOES): where the scan's few launches win, and where the loop's K² work does.
CRF_TAGS = (9, 17, 37, 73)
CRF_SENTENCES = 256  # a CRF row's batch
NO_LOOP = {"measured_on": None, "batch": None, "winners": {"train": {}, "decode": {}}}


@contextmanager
def scan_only() -> Iterator[None]:
    """bistack's CRF on its scan whatever its choice table says: the CRF rows fill the table."""
    shipped = crf_choice.table
    crf_choice.table = lambda: NO_LOOP  # type: ignore[assignment]
    try:
        yield
    finally:
        crf_choice.table = shipped


def crf_choice_table(
    rows: list[dict], device: torch.device, sentences: int = CRF_SENTENCES
) -> dict:
    """The table ``src/bistack/kernels/crf_choice.json`` ships, from the CRF-only rows: by
    stage, each measured tag count's winner (the loop over positions, the floor, where it took
    less time than bistack's scan; else the scan), at the rows' batch of ``sentences``. A row
    that failed or was not reached says nothing: its count is left out, and the rule between
    counts covers it."""
    timed = {r["row"]: r["ratio_time"] for r in rows if "ratio_time" in r}
    winners: dict[str, dict[str, str]] = {}
    for stage in ("train", "decode"):
        winners[stage] = {
            str(tags): "loop" if timed[f"crf-{stage}-{tags}"] > 1.0 else "scan"
            for tags in sorted(CRF_TAGS)
            if f"crf-{stage}-{tags}" in timed
        }
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {
        "measured_on": f"{name}, torch {torch.__version__}",
        "batch": sentences,
        "winners": winners,
    }


def crf_comparisons(device: torch.device, tags: int, sentences: int = CRF_SENTENCES) -> list:
    """The CRF alone at ``tags`` tags: bistack's (its scan on a device, its compiled kernels on
    a CPU) against the field's usual forward algorithm (a loop over positions with a
    log-sum-exp a step, one launch a position), in training (the loss's forward and backward)
    and decoding (Viterbi, the best path of each sentence as a device tensor), on the same
    random emissions ``(sentences, 40, tags)`` of lengths 8 to 40."""
    from bistack.crf import CRF

    torch.manual_seed(0)
    width = 40
    crf = CRF(tags).to(device)
    emissions = torch.randn(sentences, width, tags, device=device, requires_grad=True)
    lengths = torch.randint(8, width + 1, (sentences,), device=device)
    mask = torch.arange(width, device=device)[None, :] < lengths[:, None]
    gold = torch.randint(0, tags, (sentences, width), device=device)
    rows = torch.arange(sentences, device=device)

    def gold_score() -> torch.Tensor:
        firsts = crf.start_transitions[gold[:, 0]] + emissions[rows, 0, gold[:, 0]]
        moves = crf.transitions[gold[:, :-1], gold[:, 1:]] + emissions.gather(
            2, gold[:, 1:, None]
        ).squeeze(2)
        inner = (moves * mask[:, 1:]).sum(1)
        last = gold.gather(1, (lengths - 1)[:, None]).squeeze(1)
        return firsts + inner + crf.end_transitions[last]

    def loop_log_partition() -> torch.Tensor:
        score = crf.start_transitions + emissions[:, 0]
        for position in range(1, width):
            step = torch.logsumexp(
                score[:, :, None] + crf.transitions[None] + emissions[:, position, None, :], dim=1
            )
            score = torch.where(mask[:, position, None], step, score)
        return torch.logsumexp(score + crf.end_transitions, dim=1)

    def ours_train() -> None:
        emissions.grad = None
        with scan_only():
            crf.nll(emissions, gold, mask, validate=False).backward()

    def floor_train() -> None:
        emissions.grad = None
        (loop_log_partition() - gold_score()).mean().backward()

    def ours_decode() -> None:
        with torch.no_grad(), scan_only():
            crf.decode(emissions, mask, validate=False).best  # noqa: B018 - computed on access

    def floor_decode() -> None:
        with torch.no_grad():
            loop_viterbi(crf, emissions, mask)

    what = f"the CRF alone at {tags} tags, {sentences} sentences of 8-40 positions"
    return [
        Comparison(
            f"crf-train-{tags}",
            f"{what}: the loss's forward and backward",
            Side("bistack CRF.nll", ours_train),
            Side("a loop over positions (log-sum-exp a step)", floor_train),
            per=sentences,
        ),
        Comparison(
            f"crf-decode-{tags}",
            f"{what}: Viterbi, each sentence's best path",
            Side("bistack CRF.decode", ours_decode),
            Side("a loop over positions (max a step), then the backtrace", floor_decode),
            per=sentences,
        ),
    ]


def prebuilt_batch(task: TaggingTask, chunk: list[int], device: torch.device) -> Any:
    return task.collate(chunk).to(device)


def same_kind(optimizer: torch.optim.Optimizer, parameters: Any, **options: Any) -> Any:
    """An optimizer of ``optimizer``'s class and implementation over ``parameters``."""
    optimizer = unwrapped(optimizer)
    defaults = optimizer.defaults
    way = {k: defaults[k] for k in ("fused", "foreach") if defaults.get(k) is not None}
    return type(optimizer)(parameters, **options, **way)


# ---- the frozen feature cache ----------------------------------------------------------------


def feature_cache_comparison(train: Sentences, backbone_dir: str, device: torch.device) -> Any:
    """Every layer of every word of the training sentences, to a file on the host: bistack's
    cache against the encoder's bare forward over the same sentences, writing the same."""
    from safetensors.torch import save_file
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
    folder = Path(tempfile.mkdtemp())

    def bare() -> None:
        kept = []
        with torch.inference_mode():
            for k in range(0, len(order), 64):
                chosen = [sentences[i] for i in order[k : k + 64]]
                inputs = tokenizer(
                    chosen,
                    is_split_into_words=True,
                    truncation=True,
                    max_length=128,
                    padding=True,
                    return_tensors="pt",
                )
                states = encoder(**inputs.to(device), output_hidden_states=True).hidden_states
                kept.append(torch.stack(states[1:], -2).half().flatten(0, 1).cpu())
        save_file({"states": torch.cat(kept)}, str(folder / "bare.safetensors"))

    backbone = TransformerBackbone.load(backbone_dir)
    data = {
        "kind": "layer_tagger",
        "data": {"train": "unused"},
        "backbone": {"path": backbone_dir, "batch_size": 64},
    }
    given = [Sentence(tokens, ["O"] * len(tokens)) for tokens in sentences]
    runs = iter(range(1000))

    def ours() -> None:  # a new cache folder each call: computed, never read back
        data["backbone"]["cache_dir"] = str(folder / f"cache-{next(runs)}")
        config = build_config(LayerPoolingTaggerConfig, data, "gpu benchmark")
        cached_word_states(backbone.to(device), config, given, lambda _: None, device)

    return Comparison(
        "feature-cache",
        "frozen MiniLM-shaped word states, all layers, to a file",
        Side("bistack cache", ours),
        Side("bare forward", bare),
        per=len(train),
    )


# ---- the frozen pass in bfloat16 ----------------------------------------------------------------


def frozen_precision_comparison(
    backbone_dir: str, device: torch.device, shape: Sequence[int], batch: int, length: int
) -> Comparison:
    """The frozen pass (every layer's states, as the feature cache and a top-K run's bottom
    compute them) in bf16-mixed against float32, on random weights of ``shape`` (hidden,
    layers, heads; base size by default) from ``backbone_dir``'s config and tokenizer: one batch
    of ``batch`` rows of ``length`` subwords each, made on the device before the timer. The
    row keeps how close bfloat16's states are (cosine of the last 4 layers', as
    ``benchmarks/frozen_precision.py`` measures on the CPU)."""
    from bistack.models.backbone import TransformerBackbone
    from bistack.models.frozen_pass import FrozenPass
    from frozen_precision import last_layers
    from random_backbone import main as random_backbone

    folder = Path(tempfile.mkdtemp()) / "encoder"
    random_backbone([backbone_dir, str(folder), *(str(n) for n in shape)])
    backbone = TransformerBackbone.load(str(folder)).to(device).eval()
    vocabulary = backbone.model.config.vocab_size
    first = min(1000, vocabulary // 2)  # past a BERT vocabulary's special and unused entries
    ids = torch.randint(
        first, vocabulary, (batch, length), generator=torch.Generator().manual_seed(0)
    )
    ids, mask = ids.to(device), torch.ones(batch, length, dtype=torch.long, device=device)

    def pass_at(precision: str) -> Callable[[], None]:
        frozen = FrozenPass(precision)

        def work() -> None:
            with torch.inference_mode():
                backbone.hidden_states(ids, mask, frozen)

        return work

    full, half = (last_layers(backbone, ids, mask, p).float() for p in ("32", "bf16-mixed"))
    cosine = nn.functional.cosine_similarity(full, half, dim=-1)
    hidden, layers = backbone.hidden_size, backbone.num_layers
    return Comparison(
        "frozen-pass-bf16",
        f"frozen pass of an encoder of {layers} layers x {hidden}, batch {batch}, {length} "
        "subwords, bf16-mixed against float32",
        Side("bistack frozen pass, bf16-mixed", pass_at("bf16-mixed")),
        Side("bistack frozen pass, float32", pass_at("32")),
        per=batch,
        extra={"cosine": {"mean": float(cosine.mean()), "worst": float(cosine.min())}},
    )


# ---- a large encoder, fine-tuned ---------------------------------------------------------------


LAYER = re.compile(r"\.layer\.(\d+)\.")


def layer_groups(
    encoder: nn.Module, head: nn.Module, lr: float, backbone_lr: float, decay: float, layers: int
) -> list[dict]:
    """Layer-wise learning-rate decay, by hand: the head at ``lr``, the top layer at
    ``backbone_lr``, each below ``decay`` times the one above, the embeddings lowest."""
    by_depth: dict[int, list] = {}
    for name, parameter in encoder.named_parameters():
        found = LAYER.search(f".{name}")
        depth = int(found.group(1)) + 1 if found else (0 if "embed" in name else layers)
        by_depth.setdefault(min(depth, layers), []).append(parameter)
    groups = [{"params": list(head.parameters()), "lr": lr}]
    groups += [
        {"params": p, "lr": backbone_lr * decay ** (layers - d)}
        for d, p in sorted(by_depth.items())
    ]
    return groups


class PlainLayerModel(nn.Module):
    """transformers' encoder, a BiLSTM over its layers' CLS vectors, a linear head."""

    def __init__(self, encoder: nn.Module, hidden: int, lstm: int, labels: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.ModuleDict(
            {
                "lstm": nn.LSTM(hidden, lstm, batch_first=True, bidirectional=True),
                "out": nn.Linear(2 * lstm, labels),
            }
        )

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        cls = torch.stack([s[:, 0] for s in states.hidden_states[1:]], 1)  # (batch, layers, h)
        _, (h, _) = self.head["lstm"](cls.float())
        return self.head["out"](torch.cat([h[0], h[1]], -1))


@mark("collation")
def plain_collate(
    windows: Sequence[Sequence[int]], labels: Sequence[int], device: torch.device
) -> tuple:
    """Pre-tokenised ids padded in numpy, pinned on a GPU, copied without waiting."""
    ids = _padded(windows, max(map(len, windows)))
    tensors = [torch.from_numpy(ids), torch.from_numpy(ids > 0), torch.tensor(labels)]
    if device.type == "cuda":
        tensors = [t.pin_memory() for t in tensors]
    return tuple(t.to(device, non_blocking=True) for t in tensors)


def synthetic_table(vocab_file: Path, texts: int, folder: Path, words: int) -> Path:
    """``texts`` rows of ``words`` random words of the encoder's vocabulary, random labels."""
    rng = random.Random(0)
    vocabulary = [
        w for w in vocab_file.read_text(encoding="utf-8").split() if w.isalpha() and w.islower()
    ][:5000]
    rows = [
        " ".join(rng.choices(vocabulary, k=words)) + f"\t{rng.randint(0, 1)}" for _ in range(texts)
    ]
    table = folder / "train.tsv"
    table.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
    return table


@dataclass
class BistackFineTuning:
    """bistack's side of a fine-tuning row, set up as ``bistack train`` sets it up: its timed
    epoch, the network (for its tokenizer and learning rates) and the epoch's batches."""

    side: Side
    network: Any
    batches: list[list[int]]


def bistack_fine_tuning(
    config: Any, folder: Path, device: torch.device, precision: str | None, compiled: bool
) -> BistackFineTuning:
    """An epoch of ``config``'s run (``run_epoch``, as ``bistack train`` trains), its encoder
    compiled as ``train.compile`` compiles it where ``compiled``."""
    from bistack.models.backbone_training import compile_backbones
    from bistack.runs.loop import start_run
    from bistack.runs.optimizers import optimizer_for
    from bistack.tasks import task_of

    run = start_run(
        folder, 1, devices=1, strategy="auto", accelerator=device.type, precision=precision
    )
    prepared = task_of(config.kind).prepare(config, run)
    if compiled:
        compile_backbones(prepared.network)  # as fit does for train.compile
    optimizer = optimizer_for(
        run.fabric, config.optimizer, prepared.network, prepared.parameter_groups
    )
    wrapped, optimizer = run.fabric.setup(prepared.network, optimizer)
    loop_task = prepared.loop
    batches = bucket_batches(
        loop_task.train_lengths(), config.train.batch_size, shuffle=True, seed=1, pool=50
    )

    def epoch() -> None:
        run_epoch(run.fabric, wrapped, optimizer, loop_task, batches, EpochPlan(grad_clip=1.0))

    label = "bistack run_epoch" + (", train.compile" if compiled else "")
    return BistackFineTuning(Side(label, epoch, optimizer), prepared.network, batches)


def fine_tuning_comparisons(
    large_dir: str,
    device: torch.device,
    precision: str | None,
    batch_size: int,
    texts: int,
    max_length: int,
    compiled: bool = False,
) -> list[Comparison]:
    """A layer classifier over the encoder, fine-tuned: ``bistack train``'s recipe and loop
    against a plain loop with the same model shape, groups, optimizer kind and precision.
    ``compiled``: bistack's encoder compiled as ``train.compile`` compiles it, against the plain
    loop (eager: how far compiling takes bistack past a plain loop) and in a second row against
    bistack's own eager epoch (what compiling alone buys)."""
    from transformers import AutoModel

    from bistack.tasks import config_from_dict

    work = Path(tempfile.mkdtemp())
    table = synthetic_table(Path(large_dir) / "vocab.txt", texts, work, words=max_length)
    data = {
        "train": str(table),
        "dev": str(table),
        "text_column": "sentence",
        "label_columns": ["label"],
    }
    config = config_from_dict(
        {
            "kind": "layer_classifier",
            "data": data,
            "backbone": {
                "path": large_dir,
                "finetune": True,
                "max_length": max_length,
                "layer_lr_decay": 0.9,
            },
            "layer_pooling": {"type": "lstm", "lstm_hidden": 256},
            "optimizer": {"name": "adamw", "lr": 1e-3, "grad_clip": 1.0},
            "train": {"batch_size": batch_size, "compile": compiled},
        }
    )
    ours = bistack_fine_tuning(config, work / "run", device, precision, compiled)
    batches = ours.batches

    torch.manual_seed(0)
    encoder = AutoModel.from_pretrained(large_dir)
    hidden, layers = encoder.config.hidden_size, encoder.config.num_hidden_layers
    plain = PlainLayerModel(encoder, hidden, 256, 2).to(device)
    groups = layer_groups(plain.encoder, plain.head, 1e-3, config.backbone.lr, 0.9, layers)
    assert ours.side.optimizer is not None
    plain_optimizer = same_kind(ours.side.optimizer, groups)
    windows = ours.network.backbone.encode(
        [line.split("\t")[0] for line in table.read_text().splitlines()[1:]],
        "truncate",
        max_length=max_length,
    )
    ids = [w[0] for w in windows]  # one window a text
    labels = [int(line.rsplit("\t", 1)[1]) for line in table.read_text().splitlines()[1:]]
    dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision or "")

    def plain_epoch() -> None:
        plain.train()
        for b in batches:
            x, mask, y = plain_collate([ids[i] for i in b], [labels[i] for i in b], device)
            plain_optimizer.zero_grad(set_to_none=True)
            with torch.autocast(
                device.type, dtype=dtype or torch.float32, enabled=dtype is not None
            ):
                loss = nn.functional.cross_entropy(plain(x, mask), y)
            loss.backward()
            nn.utils.clip_grad_norm_(plain.parameters(), 1.0)
            plain_optimizer.step()

    name = f"finetune-b{batch_size}-{precision or 'fp32'}" + ("-compiled" if compiled else "")
    what = (
        f"encoder of {layers} layers x {hidden} fine-tuned, {max_length} subwords, batch "
        f"{batch_size}, {precision or 'float32'}" + (", train.compile" if compiled else "")
    )
    plain_side = Side("plain PyTorch + transformers", plain_epoch, plain_optimizer)
    rows = [Comparison(name, what, ours.side, plain_side, per=texts)]
    if compiled:  # the same compiled epoch against bistack's eager one, built alike
        eager = bistack_fine_tuning(config, work / "run-eager", device, precision, False)
        against = f"{what}, against bistack eager"
        rows.append(Comparison(f"{name}-vs-eager", against, ours.side, eager.side, per=texts))
    return rows


# ---- the report ------------------------------------------------------------------------------


def measured(device: torch.device, comparison: Comparison) -> dict:
    """Both sides measured in turn (A B A B A B) after a warm-up each; the ratio of the
    medians."""
    ours, floor = measure_interleaved(device, [comparison.ours, comparison.floor])
    row = {
        "row": comparison.row,
        "what": comparison.what,
        "items": comparison.per,
        "bistack": ours,
        "floor": floor,
        "floor_side": comparison.floor.label,
        "ratio_time": ours["median_s"] / floor["median_s"],
    }
    times = comparison.extra.get("times")
    if times:  # one sentence at a time: the p50 of the last run's calls
        row["p50_ms"] = {k: 1000 * statistics.median(v) for k, v in times.items()}
    for key in ("stages_differ", "cosine"):
        if key in comparison.extra:
            row[key] = comparison.extra[key]
    return row


def report(rows: list[dict], device: torch.device, sentences: int) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [
        "# bistack beside hand-written floors doing the same work",
        "",
        f"Device: {name}; torch {torch.__version__}; Python {platform.python_version()}; "
        f"{sentences} CoNLL-2003 training sentences. Each side: one warm-up call, then 3 timed "
        "calls taken in turn with the other side's (A B A B A B; median, min-max); the same "
        "stages inside both timers (benchmarks/timed.py). "
        "Reproduce: see the header of benchmarks/gpu.py.",
        "",
        "| row | bistack (median, min-max) | floor (median, min-max) | bistack time / floor time |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        if "error" in row:  # built or measured, it raised: the rows after it ran all the same
            lines.append(f"| {row['row']} | {row['error']} | | |")
            continue
        ours, floor = row["bistack"], row["floor"]

        def cell(m: dict, items: int = row["items"]) -> str:
            return (
                f"{items / m['median_s']:,.0f}/s ({m['median_s']:.3f} s, "
                f"{m['min_s']:.3f}-{m['max_s']:.3f})"
            )

        what = row["what"] + (f" (floor: {row['stages_differ']})" if "stages_differ" in row else "")
        if "cosine" in row:  # the same states at another precision: how close they are
            what += (
                f"; cosine of the last 4 layers' states {row['cosine']['mean']:.5f} "
                f"(worst {row['cosine']['worst']:.4f})"
            )
        if "p50_ms" in row:
            what += (
                f"; p50 {row['p50_ms']['bistack']:.2f} ms against {row['p50_ms']['floor']:.2f} ms"
            )
        lines.append(f"| {what} | {cell(ours)} | {cell(floor)} | {row['ratio_time']:.2f}x |")
    return "\n".join(lines) + "\n"


# The rows one float32 tagger serves.
TAGGER_ROWS = (
    "train-device", "train-from-ids", "predict-from-tokens", "predict-device",
    "train-device, pytorch-crf", "predict-device, pytorch-crf", "predict-one",
    "predict-confidences", "predict-confidences-host",
)  # fmt: skip
SOFTMAX_ROWS = ("train-device, softmax head", "predict-device, softmax head")
COMPILED_ROW = "finetune-b16-bf16-mixed-compiled"  # and its -vs-eager row


@dataclass(frozen=True)
class Planned:
    """A group of rows built together (one tagger serves its training and prediction rows):
    ``names`` says which, ``build`` makes their comparisons."""

    names: tuple[str, ...]
    build: Callable[[], list[Comparison]]


def planned(args: argparse.Namespace, device: torch.device, train: Sentences) -> list[Planned]:
    """Every group of rows, not yet built: the compile row first (the most uncertain, where
    asked), then the taggers, the feature cache, the frozen pass in bfloat16 and the
    fine-tuning rows."""
    found = []
    large = (args.large_texts, args.large_length)
    if args.large and args.compile:  # compiling costs minutes on a CPU: asked for where it pays
        found.append(
            Planned(
                (COMPILED_ROW, f"{COMPILED_ROW}-vs-eager"),
                lambda: fine_tuning_comparisons(
                    args.large, device, "bf16-mixed", 16, *large, compiled=True
                ),
            )
        )
    found.append(Planned(TAGGER_ROWS, lambda: tagger_comparisons(train, device, None)))
    for tags in CRF_TAGS:
        found.append(
            Planned(
                (f"crf-train-{tags}", f"crf-decode-{tags}"),
                lambda t=tags: crf_comparisons(device, t, args.crf_sentences),
            )
        )
    found.append(Planned(SOFTMAX_ROWS, lambda: softmax_comparisons(train, device)))
    found.append(
        Planned(
            ("train-device, bf16-mixed", "train-from-ids, bf16-mixed"),
            lambda: [
                c for c in tagger_comparisons(train, device, "bf16-mixed") if "train" in c.row
            ],
        )
    )
    if args.backbone:
        found.append(
            Planned(
                ("feature-cache",), lambda: [feature_cache_comparison(train, args.backbone, device)]
            )
        )
    if args.backbone:  # its config and tokenizer, at the shape asked (base size)
        found.append(
            Planned(
                ("frozen-pass-bf16",),
                lambda: [
                    frozen_precision_comparison(
                        args.backbone, device, args.frozen_shape, 64, args.frozen_length
                    )
                ],
            )
        )
    if args.large:
        for precision in (None, "bf16-mixed"):
            for batch_size in (16, 64):
                name = f"finetune-b{batch_size}-{precision or 'fp32'}"
                found.append(
                    Planned(
                        (name,),
                        lambda p=precision, b=batch_size: fine_tuning_comparisons(
                            args.large, device, p, b, *large
                        ),
                    )
                )
    return found


def comparisons(args: argparse.Namespace, device: torch.device, train: Sentences) -> list:
    """Every row's comparison, built (not yet measured): all at once, for the suite's check of
    their stages on the CPU."""
    return [c for plan in planned(args, device, train) for c in plan.build()]


def measure_each(
    plans: list[Planned], device: torch.device, written: Callable[[list], None]
) -> list:
    """Each group built, measured and freed before the next is built (at most one group's
    models on the device); a group or row that raises is recorded with its error, and the rows
    after it are measured all the same. ``written`` is given the rows after each one."""
    rows: list[dict] = []
    for plan in plans:
        try:
            built = plan.build()
        except Exception as error:  # every row of the group, with why it has no figures
            rows += [{"row": name, "error": f"building it: {error!r}"} for name in plan.names]
            written(rows)
            continue
        for comparison in built:
            try:
                rows.append(measured(device, comparison))
            except Exception as error:
                rows.append({"row": comparison.row, "error": f"measuring it: {error!r}"})
            written(rows)
        del built
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train")
    parser.add_argument("--backbone", help="MiniLM-shaped HuggingFace folder (feature cache)")
    parser.add_argument("--large", help="BERT-large-shaped HuggingFace folder (fine-tuning)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--limit", type=int, help="at most this many training sentences")
    parser.add_argument("--large-texts", type=int, default=512)
    parser.add_argument("--large-length", type=int, default=256)
    parser.add_argument(
        "--frozen-shape",
        nargs=3,
        type=int,
        default=[768, 12, 12],
        metavar=("HIDDEN", "LAYERS", "HEADS"),
        help="the frozen-pass row's encoder (base size by default)",
    )
    parser.add_argument(
        "--frozen-length", type=int, default=128, help="the frozen-pass row's subwords a row"
    )
    parser.add_argument(
        "--crf-sentences", type=int, default=CRF_SENTENCES, help="a CRF row's batch (sentences)"
    )
    parser.add_argument(
        "--compile", action="store_true", help="a fine-tuning row with train.compile (bf16, b16)"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument(
        "--rows", nargs="+", default=[], help="only the rows whose names start so (default all)"
    )
    parser.add_argument("--name", default="gpu", help="the results' file names (NAME.md, .json)")
    parser.add_argument(
        "--skip-rows", nargs="+", default=[], help="leave out the rows whose names start so"
    )
    parser.add_argument(
        "--after-existing",
        action="store_true",
        help="add the rows to those NAME.json holds already (an earlier step's), one table",
    )
    parser.add_argument(
        "--missing",
        nargs=2,
        metavar=("ROW", "WHY"),
        help="record ROW in NAME.json as not measured, with WHY (a step that timed out), and stop",
    )
    parser.add_argument(
        "--finish",
        action="store_true",
        help="after the steps: record every planned row NAME.json lacks as not reached, and "
        "write NAME.md again from NAME.json",
    )
    args = parser.parse_args(argv)
    out, name = Path(args.out), args.name
    out.mkdir(parents=True, exist_ok=True)
    earlier = (
        json.loads((out / f"{name}.json").read_text()) if (out / f"{name}.json").is_file() else []
    )
    if args.missing:  # a row its step recorded (measured, or its own error) keeps what it has
        row, why = args.missing
        if not any(r.get("row") == row for r in earlier):
            (out / f"{name}.json").write_text(
                json.dumps([*earlier, {"row": row, "error": why}], indent=1) + "\n"
            )
        return
    if args.finish:
        finish(args, out, name, earlier)
        return
    if args.train is None:
        parser.error("--train is needed to measure rows")
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")  # what bistack's commands set on a GPU
    train = [(s.tokens, s.tags) for s in read_conll(args.train)][: args.limit]
    plans = [
        plan
        for plan in planned(args, device, train)
        if (not args.rows or any(name.startswith(tuple(args.rows)) for name in plan.names))
        and not any(name.startswith(tuple(args.skip_rows)) for name in plan.names if args.skip_rows)
    ]
    before = earlier if args.after_existing else []

    def written(rows: list) -> None:  # kept as measured: a run cut short keeps them
        print(json.dumps(rows[-1])[:300], flush=True)
        (out / f"{name}.json").write_text(json.dumps([*before, *rows], indent=1) + "\n")

    rows = [*before, *measure_each(plans, device, written)]
    print(write_report(out / f"{name}.md", rows, device, len(train), args.crf_sentences))


def write_report(
    path: Path, rows: list[dict], device: torch.device, sentences: int, crf_sentences: int
) -> str:
    """``NAME.md`` from the rows as ``NAME.json`` holds them, with the CRF's choice table
    where CRF rows were measured; its text."""
    text = report(rows, device, sentences)
    if any(r["row"].startswith("crf-") and "ratio_time" in r for r in rows):
        where = (
            "copy it into src/bistack/kernels/crf_choice.json"
            if device.type != "cpu"
            else "not one to ship: a CPU runs its compiled kernels, neither of the two"
        )
        table = json.dumps(crf_choice_table(rows, device, crf_sentences), indent=2)
        text += f"\n## The CRF's choice table\n\nFrom the CRF-only rows ({where}):\n\n"
        text += f"```json\n{table}\n```\n"
    path.write_text(text)
    return text


def finish(args: argparse.Namespace, out: Path, name: str, earlier: list[dict]) -> None:
    """After the call's steps, whatever happened: every planned row that ``NAME.json`` lacks
    recorded there as not reached, and ``NAME.md`` written again from ``NAME.json``, so that a
    step killed halfway leaves both naming every row it did not reach."""
    train = [(s.tokens, s.tags) for s in read_conll(args.train)][: args.limit]
    names = [n for plan in planned(args, torch.device("cpu"), train) for n in plan.names]
    have = {row.get("row") for row in earlier}
    missing = [n for n in names if n not in have]
    why = "not reached: the steps ended before it (see run.log)"
    rows = [*earlier, *({"row": n, "error": why} for n in missing)]
    (out / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")
    device = torch.device(args.device) if args.device in ("cpu", "cuda") else torch.device("cpu")
    if device.type == "cuda" and not torch.cuda.is_available():
        device = torch.device("cpu")
    write_report(out / f"{name}.md", rows, device, len(train), args.crf_sentences)
    print(f"not reached: {', '.join(missing)}" if missing else "every planned row was reached")


if __name__ == "__main__":
    main()
