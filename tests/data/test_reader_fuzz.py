"""Every reader, fed damaged input (random bytes, truncation, Unicode line separators, byte-order
marks), returns a result or raises a clean error (``BistackError``), never anything else.

A seeded generator keeps the run repeatable and to a few seconds."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from bistack.corpus.sources import read_records
from bistack.data.conll import read_conll
from bistack.data.conllu import read_conllu
from bistack.data.corpus import read_corpus
from bistack.data.pretrained import read_word_vectors
from bistack.data.spans import read_spans
from bistack.data.tables import read_table
from bistack.errors import BistackError
from bistack.tasks import load_config

CASES = 120
SEPARATORS = ["\u2028", "\u2029", "\u0085", "\x0c", "\x0b", "\r", "\r\n", "\n", "\ufeff", "\t"]

VALID: dict[str, tuple[str, Callable[[Path], object]]] = {
    "conll": (
        "-DOCSTART- -X- O O\n\nJohn NNP I-NP I-PER\nvisited VBD I-VP O\nParis NNP I-NP I-LOC\n\n",
        read_conll,
    ),
    "tsv": (
        "text\tlabel\na good film\t1\na dull one\t0\n",
        lambda p: read_table(p, "text", ["label"], file_format="tsv"),
    ),
    "csv": (
        'text,label\n"a good, long film",1\na dull one,0\n',
        lambda p: read_table(p, "text", ["label"], file_format="csv"),
    ),
    "jsonl": (
        '{"text": "a good film", "label": 1}\n{"text": "a dull one", "label": "0"}\n',
        lambda p: read_table(p, "text", ["label"], file_format="jsonl"),
    ),
    "config": (
        "kind: classifier\ndata: {train: t.tsv, text_column: text}\n"
        "encoder: {hidden_size: 8, outer_dropout: 0.1}\ntrain: {max_epochs: 2, seed: 3}\n",
        load_config,
    ),
    "corpus": ("the cat sat\non the mat\n", lambda p: read_corpus(p, "whitespace", 4)),
    "predict lines": ("Anna left Paris\n\nPeter\n", lambda p: list(read_records(str(p), "lines"))),
    "predict conll": (
        "-DOCSTART- O\n\nAnna O\nleft O\n\nPeter O\n",
        lambda p: list(read_records(str(p), "conll")),
    ),
    "predict jsonl": (
        '{"text": "Anna left"}\n{"text": ["Peter", "left"]}\n',
        lambda p: list(read_records(str(p), "jsonl")),
    ),
    "conllu": (
        "# sent_id = 1\n# text = John left\n1-2\tJohn's\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tJohn\t_\tPROPN\tNNP\t_\t0\troot\t_\tNER=B-PER\n"
        "2\tleft\t_\tVERB\tVBD\t_\t1\tdep\t_\tNER=O\n\n",
        lambda p: (read_conllu(p, "upos"), read_conllu(p, "misc:NER", plain=False)),
    ),
    "spans": (
        '{"text": "John Smith left Paris.", "label": [[0, 10, "PER"], [16, 21, "LOC"]]}\n'
        '{"text": "Ask IBM.", "entities": [{"start": 4, "end": 7, "label": "ORG"}]}\n',
        lambda p: (read_spans(p, "BIO"), read_spans(p, "BIOES", misaligned="snap")),
    ),
    "vectors": (
        "2 3\nanna 0.1 0.2 0.3\nparis -1 0 1e-3\n",
        lambda p: read_word_vectors(p, 3, str.lower, {"anna"}, cap=10, file_format="text"),
    ),
    "vectors binary": (
        "2 3\nanna " + "abcdefghijkl" + "\nparis " + "mnopqrstuvwx" + "\n",
        lambda p: read_word_vectors(p, 3, str.lower, {"anna"}, cap=10, file_format="binary"),
    ),
    "predict conllu": (
        "# text = Anna left\n1\tAnna\t_\t_\t_\t_\t_\t_\t_\t_\n2\tleft\t_\t_\t_\t_\t_\t_\t_\t_\n",
        lambda p: list(read_records(str(p), "conllu")),
    ),
    "predict csv": (
        'id,text\n1,"Anna, left"\n2,Peter\n',
        lambda p: list(read_records(str(p), "csv")),
    ),
}


def damage(text: str, rng: random.Random) -> bytes:
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(5)
        at = rng.randint(0, len(data))
        if choice == 0:  # random bytes, often not UTF-8
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif choice == 1:  # truncation
            del data[at:]
        elif choice == 2:  # a Unicode line separator or a byte-order mark
            data[at:at] = rng.choice(SEPARATORS).encode()
        elif choice == 3 and data:  # a character gone
            del data[min(at, len(data) - 1)]
        else:  # a piece of the text repeated elsewhere
            start = rng.randint(0, len(data))
            data[at:at] = data[start : start + rng.randint(1, 12)]
    return bytes(data)


@pytest.mark.parametrize("reader", sorted(VALID))
def test_damaged_input_is_a_result_or_a_clean_error(reader, tmp_path):
    text, read = VALID[reader]
    suffix = {"tsv": ".tsv", "csv": ".csv", "jsonl": ".jsonl", "config": ".yaml"}.get(reader, "")
    read(_written(tmp_path / f"valid{suffix}", text.encode()))  # the undamaged file reads
    rng = random.Random(reader)
    for case in range(CASES):
        data = damage(text, rng)
        path = _written(tmp_path / f"case{case}{suffix}", data)
        try:
            read(path)
        except BistackError:
            pass
        except Exception as error:
            pytest.fail(f"{reader} on {data!r}: {type(error).__name__}: {error}")


def _written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
