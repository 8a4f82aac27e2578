"""The configuration schema every model kind shares: where data comes from, the token
features, the recurrent encoder, the optimiser, training, a transformer backbone (its section in
``bistack.config.backbone``), and what every top-level config has (``ExperimentConfig``);
reading YAML files into the config classes is ``bistack.config.files``.

Each field says what it controls. A kind's own sections and its top-level config live in its
family (``bistack.taggers.config``, ``bistack.text_models.config``,
``bistack.language_models.config``); reading YAML, ``--set`` overrides and earlier versions'
layouts are ``bistack.config.files``. Which config class a kind uses is the task table's
business (``bistack.tasks``): nothing here decides a kind.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from bistack.cells import CellName
from bistack.config.backbone import BackboneConfig as BackboneConfig
from bistack.config.backbone import OverBackbone as OverBackbone
from bistack.data.tokenize import check_tokenizer
from bistack.errors import ConfigError

# (key, lowest allowed, whether the lowest is allowed, highest allowed or None)
Range = tuple[str, float, bool, float | None]


@dataclass
class SplitConfig:
    """Where training data comes from, and how dev is held out when no dev file is given.
    ``CROSS_VALIDATION_KEYS``: the keys only ``bistack cv`` reads (``bistack train`` says it
    leaves them unused)."""

    CROSS_VALIDATION_KEYS: ClassVar[tuple[str, ...]] = ()

    train: str = ""  # the training file
    dev: str | None = None  # file for early stopping; None: split off dev_fraction of train
    dev_fraction: float = 0.1  # used only when dev is None
    split_seed: int = 0  # seed of that split, fixed so runs compare on the same dev set
    # How raw text becomes sentences of tokens, in training and prediction alike, kept with the
    # model: text (English: Punkt sentences, Treebank words), whitespace, spacy:NAME (a spaCy
    # pipeline, or a language such as spacy:zh) or hf:FOLDER (a HuggingFace tokenizer's words;
    # hf:default is MiniLM's).
    tokenizer: str = "text"

    def unused_in_training(self) -> list[str]:
        """The cross-validation keys this config sets, which training alone leaves unused."""
        return [key for key in self.CROSS_VALIDATION_KEYS if getattr(self, key)]

    def table_columns(self) -> tuple[str | None, str | None]:
        """The columns of a table the model was trained on that a table given to ``predict``
        is read by, ``(text, id)``: none for data that is not a table."""
        return None, None


@dataclass
class FeaturesConfig:
    """A token's own features, stacked (concatenated) before the encoder: a word embedding, a
    casing class and a character-level encoding of the word; each can be turned off."""

    word_dim: int = 100  # word embedding size; 0: no word embedding
    min_freq: int = 1  # words rarer than this in train map to <unk>
    lowercase: bool = True  # look words up lowercased (the casing feature keeps the case)
    normalise_digits: bool = True  # every digit becomes 0 before lookup
    casing_dim: int = 10  # casing-class embedding size; 0 turns the feature off
    unk_replace: float = 0.5  # in training, a singleton word becomes <unk> with this probability
    # Word vectors to initialise word embeddings: GloVe or word2vec text, fastText .vec, or
    # word2vec binary (.bin); their words join the vocabulary (see pretrained_max_words).
    pretrained: str | None = None
    pretrained_format: Literal["auto", "text", "binary"] = "auto"  # auto: .bin is binary
    # Words of the vector file added beyond the training data's, most frequent (first) first.
    pretrained_max_words: int = 100_000
    freeze_pretrained: bool = False  # keep the word embeddings as the vectors give them
    char_encoder: Literal["lstm", "cnn", "none"] = "lstm"  # character-level word encoder
    char_dim: int = 25  # character embedding size
    char_hidden: int = 25  # char BiLSTM hidden size per direction, or CNN filters


@dataclass
class PartDropoutConfig:
    """In training, each token's vector from one stacked part is zeroed with this probability
    (the others are kept, and the part is rescaled by 1 / (1 - p)), so the model cannot lean on
    one part alone; 0 turns it off for that part."""

    transformer: float = 0.0  # the transformer's word state
    words: float = 0.0  # the word embedding
    chars: float = 0.0  # the character-level encoding
    casing: float = 0.0  # the casing embedding

    def rates(self) -> dict[str, float]:
        """The rates by part name (the names ``TokenEmbedder.parts`` gives, and
        ``transformer``)."""
        return dataclasses.asdict(self)


@dataclass
class EncoderConfig:
    # The recurrent cell; mingru/minlstm (Feng et al. 2024) compute a layer at every position at
    # once (a matrix product and a parallel scan) instead of one position after another.
    cell: CellName = "lstm"
    hidden_size: int = 200  # per direction
    bidirectional: bool = True  # False for causal models: streaming, language models
    num_layers: int = 1  # stacked layers
    residual: bool = False  # residual stack (each layer's input added to its output)
    dropout: float = 0.5  # between stacked layers
    # On the vectors entering the encoder and on what leaves it (its states, or the pooled
    # vector of a text model); was train.dropout before the task table.
    outer_dropout: float = 0.5


@dataclass
class OptimizerConfig:
    # The optimiser; Adam at 0.002 is the recipe every shipped recurrent config uses (SGD at
    # 0.1 with momentum is Ma & Hovy's, and wants a learning rate of its own).
    name: Literal["sgd", "adam", "adamw"] = "adam"
    lr: float = 0.002  # learning rate (a fine-tuned backbone has its own, backbone.lr)
    momentum: float = 0.9  # SGD only
    weight_decay: float = 0.0
    lr_decay: float = 0.05  # lr / (1 + lr_decay * epoch), as in Ma & Hovy 2016
    grad_clip: float = 5.0  # max gradient norm; 0 turns clipping off
    # Fraction of all training steps with a linear warm-up, after which the rate decays
    # linearly to 0 (the usual fine-tuning schedule); 0: no warm-up, lr_decay per epoch only.
    warmup_fraction: float = 0.0
    # After the warm-up: "linear" decays the rate linearly to 0 at the last step (where
    # warmup_fraction is set; without one, lr_decay per epoch alone), "cosine" along half a
    # cosine to 0 at the last step, with or without a warm-up (the fine-tuning notebooks').
    schedule: Literal["linear", "cosine"] = "linear"

    def described(self) -> str:
        """What a run's first log line says of it: ``adam, lr 0.002, decay 0.05 an epoch``."""
        parts = [self.name, f"lr {self.lr:g}"]
        if self.name == "sgd":
            parts.append(f"momentum {self.momentum:g}")
        if self.lr_decay:
            parts.append(f"decay {self.lr_decay:g} an epoch")
        if self.warmup_fraction:
            parts.append(f"warm-up {self.warmup_fraction:g}")
        if self.schedule == "cosine":
            parts.append("cosine to 0")
        return ", ".join(parts)


@dataclass
class TrainConfig:
    batch_size: int = 32  # training examples per step
    max_epochs: int = 30  # at most this many passes over the training data
    patience: int = 5  # stop after this many epochs without a better dev score
    # A dev score better than the best by no more than this does not count against patience
    # (the best weights are kept all the same); in the dev metric's units, 0: any gain counts.
    min_delta: float = 0.0
    seed: int = 1  # seeds every random draw: initialisation, batch order, dropout
    max_minutes: float | None = None  # stop after the epoch that crosses this wall-clock budget
    eval_batch_size: int = 256  # examples per batch when scoring dev and predicting
    # Training batches of similar length waste little compute on padding. Off: random batches,
    # whose targets are a fair sample, for regression where length correlates with the target
    # (length-sorted batches then pull the output bias back and forth from batch to batch).
    length_buckets: bool = True
    # Write a checkpoint (weights, optimizer, generators, epoch, early stopping) every this many
    # epochs, for ``bistack train --resume``; 0: none.
    checkpoint_every: int = 1
    # Score dev and save the best model with an exponential moving average of the trained
    # weights, this decay per step (e.g. 0.999: about the last 1,000 steps); 0: the weights
    # of the last step, as trained (``bistack.runs.averaging``).
    weight_average: float = 0.0
    # Step the optimizer once every this many batches, their gradients summed (each batch's loss
    # divided by it): steps of batch_size x this examples, for a large encoder whose batch of
    # that size does not fit in memory. 1: a step per batch.
    accumulate_batches: int = 1
    # Validate (score dev, keep the best model so far) every this many optimizer steps, counted
    # over the whole run, or, below 1, this share of each epoch (0.25: four times an epoch),
    # besides each epoch's end; patience then counts validations, not epochs. A fine-tuned
    # encoder often peaks mid-epoch. 0: once an epoch.
    eval_every: float = 0.0
    # Compile the fine-tuned transformer for training (torch.compile, in place: the saved
    # weights keep their names). The first step compiles, and so do the first at another batch
    # shape (the shape is then compiled as dynamic) and the first dev scoring; prediction runs
    # uncompiled.
    compile: bool = False


@dataclass
class ExperimentConfig:
    """What every top-level config has: the model kind, and how training runs.

    ``RANGES``: the numeric bounds of the class's keys, checked by :meth:`validate`; a family's
    config extends the shared ones with its sections'. ``INPUT_KEYS``: the keys that name
    files or folders a run reads (the data's here; a family adds its sections').
    ``SUMMARY_KEYS``: the sections that say what the model is (the model card's "settings that
    matter", ``GET /info``'s config).
    """

    RANGES: ClassVar[tuple[Range, ...]] = ()
    INPUT_KEYS: ClassVar[tuple[str, ...]] = ("data.train", "data.dev")
    # Of the INPUT_KEYS, those that may name a HuggingFace hub id (``org/name``) instead.
    HUB_KEYS: ClassVar[tuple[str, ...]] = ()
    SUMMARY_KEYS: ClassVar[tuple[str, ...]] = ()

    kind: str  # the model kind (the task table's key); each config class fixes its own
    optimizer: OptimizerConfig
    train: TrainConfig
    data: SplitConfig  # each family's holds its own kind of data (a subclass)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for config.json and for comparing runs."""
        return dataclasses.asdict(self)

    @property
    def fine_tunes_transformer(self) -> bool:
        """Whether training fine-tunes a transformer (what ``train.compile`` compiles)."""
        return False

    @property
    def frozen_backbone(self) -> BackboneConfig | None:
        """The transformer whose states a run computes once and caches, where the model reads
        a frozen one (None: it reads none, or fine-tunes it)."""
        return None

    def validate(self, source: str) -> None:
        """Reject values that would only fail later, deep inside torch; subclasses add theirs."""
        if not self.data.train:
            raise ConfigError(f"{source}: data.train is required: the file to train on")
        check_tokenizer(self.data.tokenizer, source)
        check_ranges(self, source)
        if self.train.compile and not self.fine_tunes_transformer:
            raise ConfigError(
                f"{source}: train.compile compiles a fine-tuned transformer; this model "
                "fine-tunes none (a recurrent model, or backbone.finetune: false), so it would "
                "do nothing"
            )

    def input_paths(self) -> list[tuple[str, str]]:
        """The files and folders a run of this config reads (``(key, path)``), which its output
        must not be, contain or lie inside."""
        found = []
        for key in self.INPUT_KEYS:
            section, name = key.split(".")
            part = getattr(self, section)  # an optional section may be None
            value = None if part is None else getattr(part, name)
            if isinstance(value, str) and value and value != "default":
                found.append((key, value))
        return found

    @classmethod
    def upgrade(cls, data: dict[str, Any], legacy: bool, source: str) -> None:
        """Rewrite, in place, keys that earlier versions kept elsewhere (``legacy``: the file
        named its kind by the older ``task``): ``train.dropout`` is ``encoder.outer_dropout``
        and ``train.calibrate`` (when true) ``regression.calibrate``. A kind whose keys moved
        otherwise says so in its own ``upgrade``."""
        train = data.get("train")
        if not isinstance(train, dict):
            return
        if "dropout" in train:
            move_dropout_to_encoder(data, train.pop("dropout"), source)
        if "calibrate" in train:
            cls.take_calibrate(data, train.pop("calibrate"))

    @classmethod
    def take_calibrate(cls, data: dict[str, Any], calibrate: Any) -> None:
        """``train.calibrate`` of an earlier version: when true, ``regression.calibrate``
        (which a kind without that section then refuses by name); a regressor keeps it either
        way (``bistack.text_models.config.Regresses``)."""
        if calibrate:
            set_calibrate(data, calibrate)


def move_dropout_to_encoder(data: dict[str, Any], dropout: Any, source: str) -> None:
    """``train.dropout`` of an earlier version, as ``encoder.outer_dropout``."""
    encoder = data.setdefault("encoder", {})
    if isinstance(encoder, dict):
        if "outer_dropout" in encoder and encoder["outer_dropout"] != dropout:
            raise ConfigError(
                f"{source}: train.dropout is now encoder.outer_dropout; give only that"
            )
        encoder["outer_dropout"] = dropout


def set_calibrate(data: dict[str, Any], calibrate: Any) -> None:
    """``train.calibrate`` of an earlier version, as ``regression.calibrate``."""
    regression = data.setdefault("regression", {})
    if isinstance(regression, dict):
        regression["calibrate"] = calibrate


def check_features(features: FeaturesConfig | None, source: str) -> None:
    """Features that are given must have a part that is on."""
    if features is None:
        return
    if not (features.word_dim or features.casing_dim or features.char_encoder != "none"):
        raise ConfigError(
            f"{source}: every feature is off (features.word_dim 0, casing_dim 0, char_encoder "
            "none); turn on at least one"
        )
    if features.pretrained and features.word_dim == 0:
        raise ConfigError(
            f"{source}: features.pretrained needs a word embedding: set features.word_dim to "
            "the vectors' size"
        )


def check_part_dropout(
    dropout: PartDropoutConfig, features: FeaturesConfig | None, source: str
) -> None:
    """A rate for a part that is not there is a mistake, not a no-op."""
    present = {
        "words": features is not None and features.word_dim > 0,
        "chars": features is not None and features.char_encoder != "none",
        "casing": features is not None and features.casing_dim > 0,
    }
    for part, there in present.items():
        if getattr(dropout, part) > 0 and not there:
            raise ConfigError(
                f"{source}: part_dropout.{part} is set, but the features have no {part} part"
            )


# The shared sections' bounds; each family's config class adds its own sections'.
SHARED_RANGES: tuple[Range, ...] = (
    ("data.dev_fraction", 0.0, False, 1.0),
    ("features.word_dim", 0, True, None),
    ("features.min_freq", 1, True, None),
    ("features.pretrained_max_words", 0, True, None),
    ("features.casing_dim", 0, True, None),
    ("features.unk_replace", 0.0, True, 1.0),
    ("features.char_dim", 1, True, None),
    ("features.char_hidden", 1, True, None),
    ("encoder.hidden_size", 1, True, None),
    ("encoder.num_layers", 1, True, None),
    ("encoder.dropout", 0.0, True, 0.99),
    ("encoder.outer_dropout", 0.0, True, 0.99),
    ("optimizer.lr", 0.0, False, None),
    ("optimizer.lr_decay", 0.0, True, None),
    ("optimizer.grad_clip", 0.0, True, None),
    ("optimizer.warmup_fraction", 0.0, True, 1.0),
    ("train.batch_size", 1, True, None),
    ("train.max_epochs", 1, True, None),
    ("train.patience", 1, True, None),
    ("train.min_delta", 0.0, True, None),
    ("train.checkpoint_every", 0, True, None),
    ("train.weight_average", 0.0, True, 0.9999),
    ("train.accumulate_batches", 1, True, None),
    ("train.eval_every", 0.0, True, None),
    ("train.eval_batch_size", 1, True, None),
    ("backbone.max_length", 8, True, None),
    ("backbone.stride", 0, True, None),
    ("backbone.lr", 0.0, False, None),
    ("backbone.batch_size", 1, True, None),
    ("backbone.context", 0, True, None),
    ("backbone.layer_lr_decay", 0.0, False, 1.0),
    ("part_dropout.transformer", 0.0, True, 0.99),
    ("part_dropout.words", 0.0, True, 0.99),
    ("part_dropout.chars", 0.0, True, 0.99),
    ("part_dropout.casing", 0.0, True, 0.99),
)


def check_ranges(config: ExperimentConfig, source: str) -> None:
    """Reject values that would only fail later, deep inside torch: any number that is not
    finite (NaN passes every comparison), then each key outside its range."""
    for key, value in numbers_of(config):
        if not math.isfinite(value):
            raise ConfigError(f"{source}: {key} must be a finite number, got {value!r}")
    for key, low, inclusive, high in type(config).RANGES:
        section, name = key.split(".")
        given: float | None = getattr(getattr(config, section, None), name, None)
        if given is None:
            continue
        too_low = given < low if inclusive else given <= low
        if too_low or (high is not None and given > high):
            bound = f"{'>=' if inclusive else '>'} {low}" + (f" and <= {high}" if high else "")
            raise ConfigError(f"{source}: {key} must be {bound}, got {given!r}")
    every = getattr(getattr(config, "train", None), "eval_every", 0.0)
    if every > 1 and not float(every).is_integer():
        raise ConfigError(
            f"{source}: train.eval_every must be a whole number of optimizer steps, or below 1 "
            f"a share of an epoch, got {every!r}"
        )


def numbers_of(section: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every float setting of a config (or section), by its dotted key, nested sections and
    lists included."""
    if dataclasses.is_dataclass(section):
        items = [(f.name, getattr(section, f.name)) for f in dataclasses.fields(section)]
    elif isinstance(section, dict):
        items = list(section.items())
    elif isinstance(section, list | tuple):
        items = [(str(i), value) for i, value in enumerate(section)]
    else:
        return [(prefix, section)] if isinstance(section, float) else []
    found = []
    for name, value in items:
        found += numbers_of(value, f"{prefix}.{name}" if prefix else str(name))
    return found
