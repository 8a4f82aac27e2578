"""CoNLL-U files (Universal Dependencies): ten tab-separated columns per word, comments kept.

``ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC``. A sentence's ``# key = value``
comments become its metadata (``sent_id``, ``text``...). Multiword-token ranges (``1-2``) and
empty nodes (``8.1``) are skipped: the words of a range carry the tags, and empty nodes are not in
the text. Any column can be the tag: ``upos``, ``xpos``, or a field of MISC (``misc:NER`` reads
``NER=B-PER`` there).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from bistack.data.conll import BadLine, Sentence, check_one_scheme, numbered_lines
from bistack.errors import DataError
from bistack.schemes import split_tag

COLUMNS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")


def tag_getter(tag_field: str, source: str | Path = "config") -> tuple[int, str | None]:
    """``(column index, MISC key or None)`` for ``upos``, ``xpos``, ``misc:KEY`` (or any column)."""
    name, _, key = tag_field.partition(":")
    if name not in COLUMNS or name in ("id", "form") or (name == "misc") != bool(key):
        raise DataError(
            source,
            f"data.tag_field {tag_field!r}: expected a CoNLL-U column (upos, xpos, lemma, "
            "deprel...) or misc:KEY for a KEY=value field of MISC",
        )
    return COLUMNS.index(name), key or None


def parse_conllu(
    lines: Iterable[tuple[int, str | BadLine]],
    tag_field: str | None = "upos",
    plain: bool = True,
    source: str | Path = "input",
) -> Iterator[Sentence | BadLine]:
    """CoNLL-U read a line at a time, the one set of rules for training, evaluation and
    prediction: ten tab-separated columns a word; ``# key = value`` lines before a sentence's
    words its metadata (``# newdoc`` opens a document); multiword-token ranges and empty nodes
    skipped. ``lines``: numbered texts (a :class:`BadLine` is passed on in its place);
    ``tag_field`` None: words only. A line that breaks a rule is a :class:`BadLine` in its
    place (the reader of a training file stops there; prediction goes on)."""
    getter = tag_getter(tag_field, source) if tag_field else None
    document = 0
    current = Sentence([], [])

    def finished(sentence: Sentence) -> Sentence:
        nonlocal document
        document += any(key.split()[:1] == ["newdoc"] for key in sentence.metadata)
        sentence.document = document
        return sentence

    for number, raw in lines:
        if isinstance(raw, BadLine):
            yield raw
            continue
        line = raw.rstrip("\r\n")
        if not line.strip():
            if current.tokens:
                yield finished(current)
            elif current.metadata:
                yield BadLine(number, "a sentence with comments but no words ends here")
            current = Sentence([], [])
            continue
        if line.startswith("#"):
            if current.tokens:
                yield BadLine(number, "a comment inside a sentence; comments come before words")
                continue
            key, sep, value = line[1:].partition("=")
            current.metadata[key.strip()] = value.strip() if sep else ""
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            yield BadLine(
                number,
                "expected 10 tab-separated columns (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL "
                f"DEPS MISC), found {len(columns)}",
            )
            continue
        word_id = columns[0]
        if "-" in word_id or "." in word_id:  # a multiword token's range, or an empty node
            continue
        if not word_id.isdigit():
            yield BadLine(number, f"word id {word_id!r} is not a number")
            continue
        if getter is not None:
            tag = _tag(columns, getter, plain)
            if isinstance(tag, BadLine):
                yield BadLine(number, tag.problem)
                continue
            current.tags.append(tag)
        if not current.tokens:
            current.line = number
        current.tokens.append(columns[1])
    if current.tokens:
        yield finished(current)


def read_conllu(
    path: str | Path, tag_field: str | None = "upos", *, plain: bool = True
) -> list[Sentence]:
    """Read a CoNLL-U file (:func:`parse_conllu`'s rules), a DataError naming the first line
    that breaks one; ``tag_field=None`` reads words only. ``plain`` takes tags as labels of
    their own (UPOS, XPOS); ``plain=False`` checks them as entity tags (``misc:NER``)."""
    sentences: list[Sentence] = []
    for item in parse_conllu(numbered_lines(path), tag_field, plain, path):
        if isinstance(item, BadLine):
            raise DataError(path, item.problem, item.number)
        sentences.append(item)
    if not sentences:
        raise DataError(path, "no sentences found: the file is empty or holds only comments")
    if tag_field and not plain:
        check_one_scheme(sentences, path)
    return sentences


def _tag(columns: list[str], getter: tuple[int, str | None], plain: bool) -> str | BadLine:
    """The tag ``getter`` reads from a word's ``columns``, or why there is none (the line's
    number is its caller's)."""
    index, key = getter
    value = columns[index]
    if key is not None:
        fields = dict(f.partition("=")[::2] for f in value.split("|") if f != "_")
        if key not in fields:
            return BadLine(0, f"MISC has no {key}= field: {value!r}")
        value = fields[key]
    if value == "_" or not value:
        return BadLine(0, f"no tag in {COLUMNS[index].upper()} (it is {value!r})")
    if not plain:
        try:
            split_tag(value)
        except ValueError as error:
            return BadLine(0, str(error))
    return value


def write_conllu(
    sentences: Sequence[tuple[Sequence[str], Sequence[str]]],
    tag_field: str = "misc:NER",
    texts: Sequence[str] | None = None,
) -> str:
    """CoNLL-U text of (tokens, tags) sentences with the tag in ``tag_field`` and the other
    columns ``_``; each sentence gets its ``# text`` when ``texts`` are given."""
    index, key = tag_getter(tag_field)
    blocks = []
    for number, (tokens, tags) in enumerate(sentences):
        lines = [f"# text = {texts[number]}"] if texts is not None else []
        for position, (token, tag) in enumerate(zip(tokens, tags, strict=True), start=1):
            row = [str(position), token, *["_"] * 8]
            row[index] = f"{key}={tag}" if key else tag
            lines.append("\t".join(row))
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)
