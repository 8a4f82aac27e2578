"""CoNLL column files: one token per line, a blank line between sentences.

``-DOCSTART-`` lines are skipped. Columns are split on any run of tabs or spaces; the token and
tag columns are selectable (default: first and last), as in the CoNLL-2003 four-column format
``token POS chunk NER``.

A line that starts with ``#`` where a sentence starts is a comment (``# sent_id = 1``, as
exporters write them) and is skipped, unless it reads as a token line: as many columns as the
file's token lines, and a valid tag where tags are entity tags. So the token ``#`` tagged ``O``
stays a token, and ``# sent_id = 1`` in a four-column file is not read as the token ``#`` with
the tag ``1``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bistack.errors import DataError
from bistack.schemes import split_tag


@dataclass
class Sentence:
    """Tokens and their tags (empty when unlabelled); ``line`` is where it starts in its file;
    ``document`` numbers the document it belongs to in its file (a new one at each
    ``-DOCSTART-`` in CoNLL columns, ``# newdoc`` in CoNLL-U, or change of a span record's
    ``document`` field): taggers that read a document's other sentences as context (the
    backbone's ``context``) keep to it."""

    tokens: list[str]
    tags: list[str] = field(default_factory=list)
    line: int = 0
    metadata: dict[str, str] = field(default_factory=dict)  # CoNLL-U comments: sent_id, text...
    document: int = 0


def read_conll(
    path: str | Path, token_column: int = 0, tag_column: int | None = -1, *, plain: bool = False
) -> list[Sentence]:
    """Read a CoNLL file. ``tag_column=None`` reads tokens only (for unlabelled input);
    ``plain`` takes tags as labels of their own (parts of speech), not entity tags."""
    sentences: list[Sentence] = []
    document = 0
    current = Sentence([], [], document=document)
    lines = list(numbered_lines(path))
    expected_columns: tuple[int, int] | None = None  # (count, line where it was first seen)
    token_width = next(
        (len(c) for _, c in ((n, t.split()) for n, t in lines) if c and c[0][0] != "#"), None
    )
    for number, line in lines:
        columns = line.split()
        if not columns:
            if current.tokens:
                sentences.append(current)
            current = Sentence([], [], document=document)
            continue
        if columns[0] == "-DOCSTART-":
            if current.tokens:  # no blank line before it: the sentence ends here all the same
                sentences.append(current)
            document += 1
            current = Sentence([], [], document=document)
            continue
        starts = not current.tokens and columns[0].startswith("#")
        if starts and _is_comment(columns, token_width, tag_column, plain):
            continue
        if expected_columns is None:
            expected_columns = (len(columns), number)
            _check_column_index(path, number, columns, token_column, tag_column)
        elif len(columns) != expected_columns[0]:
            raise DataError(
                path,
                f"expected {expected_columns[0]} columns (as on line {expected_columns[1]}), "
                f"found {len(columns)}: {line.strip()!r}",
                number,
            )
        if not current.tokens:
            current.line = number
        current.tokens.append(columns[token_column])
        if tag_column is not None:
            tag = columns[tag_column]
            if not plain:
                try:
                    split_tag(tag)
                except ValueError as error:
                    raise DataError(path, str(error), number) from None
            current.tags.append(tag)
    if current.tokens:
        sentences.append(current)
    if not sentences:
        raise DataError(
            path, "no sentences found: the file is empty or holds only -DOCSTART- or comments"
        )
    if tag_column is not None and not plain:
        check_one_scheme(sentences, path)
    return sentences


def _is_comment(
    columns: Sequence[str], token_width: int | None, tag_column: int | None, plain: bool
) -> bool:
    """Whether a line starting with ``#`` at a sentence start is a comment (see the module)."""
    if len(columns) != token_width:
        return True
    if tag_column is None:
        return columns[0] != "#" or (len(columns) > 2 and columns[2] == "=")
    if plain:
        return len(columns) > 2 and columns[2] == "="  # "# key = value"
    try:
        split_tag(columns[tag_column])
    except (ValueError, IndexError):
        return True
    return False


def check_one_scheme(sentences: Sequence[Sentence], path: str | Path) -> None:
    """Raise DataError when sentences show two tagging schemes (a BIOES sentence in an IOB1
    file, say): converting the file from one of them would silently change the other's."""
    first: dict[str, int] = {}
    for sentence in sentences:
        scheme = _sentence_scheme(sentence.tags)
        if scheme is not None:
            first.setdefault(scheme, sentence.line)
            if len(first) > 1:
                (one, line), (other, _) = sorted(first.items(), key=lambda item: item[1])[:2]
                raise DataError(
                    path,
                    f"mixes tagging schemes: this sentence is {other}, the one on line {line} "
                    f"is {one}; write the file in one scheme",
                    sentence.line if scheme == other else first[other],
                )


def _sentence_scheme(tags: Sequence[str]) -> str | None:
    """The scheme a sentence's tags can only be written in, or None when they fit any.

    E-/S- tags: BIOES. An entity opened by I- (after O, another type or at the start): IOB1. An
    entity opened by B- (not right after one of its type): BIO, or BIOES when E-/S- appear.
    """
    opened_by_b = opened_by_i = False
    previous_prefix, previous_type = "O", ""
    for tag in tags:
        prefix, entity_type = split_tag(tag)
        if prefix in ("E", "S"):
            return "BIOES"
        opens = previous_prefix == "O" or previous_type != entity_type
        opened_by_i = opened_by_i or (prefix == "I" and opens)
        opened_by_b = opened_by_b or (prefix == "B" and opens)
        previous_prefix, previous_type = prefix, entity_type
    if opened_by_i:
        return "IOB1"
    return "BIO" if opened_by_b else None


def _check_column_index(
    path: str | Path, number: int, columns: Sequence[str], token: int, tag: int | None
) -> None:
    for name, index in (("token", token), ("tag", tag)):
        if index is not None and not -len(columns) <= index < len(columns):
            raise DataError(
                path, f"{name} column {index} does not exist: the line has {len(columns)}", number
            )


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text), with non-UTF-8 bytes reported by line."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below; bytes so decoding errors have lines
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise DataError(
                    path,
                    f"not valid UTF-8 (byte {raw[error.start]:#04x} at column {error.start + 1})",
                    number,
                ) from None


def write_conll(sentences: Sequence[Sentence], predicted: Sequence[Sequence[str]]) -> str:
    """CoNLL text of ``token<TAB>tag`` lines, a blank line after each sentence."""
    blocks = []
    for sentence, tags in zip(sentences, predicted, strict=True):
        blocks.append(
            "".join(f"{t}\t{g}\n" for t, g in zip(sentence.tokens, tags, strict=True)) + "\n"
        )
    return "".join(blocks)
