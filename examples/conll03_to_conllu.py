"""Write CoNLL-2003 as CoNLL-U, so a part-of-speech tagger trains on a real CoNLL-U file.

No Universal Dependencies treebank ships inside a PyPI package we may install here, so the proof
that bistack reads CoNLL-U is CoNLL-2003's own POS column: XPOS is its Penn Treebank tag, UPOS
that tag mapped to Universal POS (the UD project's table for English), MISC ``NER=`` its entity
tag; each document starts with ``# newdoc``, each sentence has ``# sent_id`` and ``# text``.

    python examples/conll03_to_conllu.py         # -> runs/conll03-conllu/{train,dev}.conllu
    bistack train configs/conll03-pos.yaml --output runs/conll03-pos
"""

from __future__ import annotations

import argparse
from pathlib import Path

DATA = Path("../shared/data/conll2003")  # from the repository's root, as every README command

UPOS = {
    **dict.fromkeys(["NN", "NNS"], "NOUN"),
    **dict.fromkeys(["NNP", "NNPS"], "PROPN"),
    **dict.fromkeys(["VB", "VBD", "VBG", "VBN", "VBP", "VBZ"], "VERB"),
    "MD": "AUX",
    **dict.fromkeys(["JJ", "JJR", "JJS"], "ADJ"),
    **dict.fromkeys(["RB", "RBR", "RBS", "WRB"], "ADV"),
    **dict.fromkeys(["DT", "PDT", "WDT"], "DET"),
    **dict.fromkeys(["PRP", "PRP$", "WP", "WP$", "EX"], "PRON"),
    **dict.fromkeys(["IN", "RP"], "ADP"),
    **dict.fromkeys(["TO", "POS"], "PART"),
    "CC": "CCONJ",
    "CD": "NUM",
    "UH": "INTJ",
    **dict.fromkeys(["SYM", "$", "#"], "SYM"),
    **dict.fromkeys([".", ",", ":", "``", "''", '"', "(", ")", "-LRB-", "-RRB-"], "PUNCT"),
}


def convert(source: Path, target: Path, split: str) -> int:
    """Write ``source`` (token POS chunk NER) to ``target`` as CoNLL-U; returns sentences."""
    blocks, sentence, newdoc = [], [], False
    for line in [*source.read_text(encoding="utf-8-sig").splitlines(), ""]:
        columns = line.split()
        if columns and columns[0] == "-DOCSTART-":
            newdoc = True
        elif columns:
            sentence.append(columns)
        elif sentence:
            header = ["# newdoc"] if newdoc else []
            header += [
                f"# sent_id = {split}-{len(blocks) + 1}",
                f"# text = {' '.join(c[0] for c in sentence)}",
            ]
            rows = [
                "\t".join(
                    [str(i), token, "_", UPOS.get(pos, "X"), pos, "_", "_", "_", "_", f"NER={ner}"]
                )
                for i, (token, pos, _chunk, ner) in enumerate(sentence, start=1)
            ]
            blocks.append("\n".join(header + rows) + "\n")
            sentence, newdoc = [], False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return len(blocks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the CoNLL-2003 folder")
    parser.add_argument("--output", type=Path, default=Path("runs/conll03-conllu"))
    args = parser.parse_args()
    for split in ("train", "dev"):
        count = convert(args.data / f"{split}.txt", args.output / f"{split}.conllu", split)
        print(f"{args.output / f'{split}.conllu'}: {count} sentences")


if __name__ == "__main__":
    main()
