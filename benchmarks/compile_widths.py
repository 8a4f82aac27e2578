"""How many graphs ``train.compile`` compiles over real data: a compiled encoder compiles one
graph for each batch shape it meets, and with ``train.compile`` bistack pads each batch's width
to a bucket (16, 32, 64... subwords) and leaves the number of rows dynamic, so the graphs are the
distinct widths (a batch of one row apart: PyTorch specialises a dimension of 1). Counted here
without compiling anything: every CoNLL-2003 training and dev sentence cut into the default
backbone's subwords (MiniLM's tokenizer) in the batches a layer tagger trains and scores in
(``train.batch_size`` 32 of similar lengths, dev at ``backbone.batch_size`` 32), widths with
the buckets and without.

    .venv/bin/python benchmarks/compile_widths.py [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "conll2003"


def shapes(backbone, sentences: list[list[str]], size: int, bucketed: bool) -> set[tuple]:
    """The (rows, width) of each batch of ``sentences`` as training and scoring make them."""
    from bistack.data.buckets import bucket_batches
    from bistack.data.subwords import word_pieces

    settings = replace(backbone.subword_settings(None), bucketed=bucketed)
    batches = bucket_batches([len(s) for s in sentences], size, shuffle=True, seed=0, pool=50)
    found = set()
    for indices in batches:
        arrays = word_pieces(backbone.subwords, [sentences[i] for i in indices], settings)
        found.add(arrays.input_ids.shape)
    return found


def graphs(found: set[tuple]) -> int:
    """Graphs compiled for these shapes: one a width, rows dynamic (but a batch of one)."""
    return len({(width, rows == 1) for rows, width in found})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not (DATA / "train.txt").is_file():
        print(f"skipped: CoNLL-2003 is not at {DATA}", file=sys.stderr)
        return 0
    from bistack.data.conll import read_conll
    from bistack.models.backbone import TransformerBackbone

    backbone = TransformerBackbone.load("default")
    split = {
        name: [list(s.tokens) for s in read_conll(DATA / f"{name}.txt")]
        for name in ("train", "dev")
    }
    result = {}
    for bucketed in (True, False):
        found = shapes(backbone, split["train"], 32, bucketed) | shapes(
            backbone, split["dev"], 32, bucketed
        )
        result["with buckets" if bucketed else "without"] = {
            "batch shapes": len(found),
            "widths": sorted({w for _, w in found}),
            "graphs": graphs(found),
        }
    print(json.dumps(result))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "compile-widths.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
