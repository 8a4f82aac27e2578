"""CoNLL column files: one token per line, a blank line between sentences.

``-DOCSTART-`` lines are skipped. Columns are split on any run of tabs or spaces; the token and
tag columns are selectable (default: first and last), as in the CoNLL-2003 four-column format
``token POS chunk NER``.

A line that starts with ``#`` where a sentence starts is a comment (``# sent_id = 1``, as
exporters write them) and is skipped, unless it reads as a token line: as many columns as the
file's token lines, and a valid tag where tags are entity tags (a ``# key = value`` line is a
comment where tags are labels of their own, parts of speech). So a tweet's ``#hashtag O`` and
the token ``#`` tagged ``O`` stay tokens, and ``# sent_id = 1`` in a four-column file is not
read as the token ``#`` with the tag ``1``. Training, evaluation and ``predict --input`` read
with these rules alike (:func:`parse_conll`), so a file means the same to each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
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


@dataclass(frozen=True)
class Layout:
    """What a file's token lines look like, from the first of them: how many columns, and
    whether a tag column holds entity tags (``tag_column`` None: tokens only, tags unread)."""

    width: int
    tag_column: int | None
    entity_tags: bool
    line: int = 0  # the first token line's number

    def is_comment(self, columns: Sequence[str]) -> bool:
        """Whether a line starting with ``#`` where a sentence starts is a comment (see the
        module): it is, unless it reads as a token line of this layout."""
        if len(columns) != self.width:
            return True
        if self.width == 1:
            return False  # "#hashtag" in a file of tokens alone is a token
        if not self.entity_tags:
            return len(columns) > 2 and columns[2] == "="  # "# key = value"
        tag = columns[-1 if self.tag_column is None else self.tag_column]
        return not is_entity_tag(tag)


def is_entity_tag(tag: str) -> bool:
    try:
        split_tag(tag)
    except ValueError:
        return False
    return True


def layout_of(
    columns: Sequence[str], tag_column: int | None, plain: bool | None, line: int = 0
) -> Layout:
    """The layout of a file whose first token line is ``columns``; ``plain`` None: its tags
    (read or not) are entity tags when the line's tag column holds one."""
    if plain is None:
        column = columns[-1 if tag_column is None else tag_column] if len(columns) > 1 else ""
        plain = not is_entity_tag(column)
    return Layout(len(columns), tag_column, entity_tags=not plain, line=line)


@dataclass(frozen=True)
class BadLine:
    """A line that could not be read (its bytes not UTF-8): streamed past as itself."""

    number: int
    problem: str


def parse_conll(
    lines: Iterable[tuple[int, str | BadLine]],
    tag_column: int | None = -1,
    plain: bool | None = False,
    token_column: int = 0,
    check: Callable[[int, list[str]], None] | None = None,
) -> Iterator[Sentence | BadLine]:
    """CoNLL columns read a line at a time, the one set of rules for training, evaluation and
    prediction: a blank line ends a sentence, ``-DOCSTART-`` starts a document (and ends a
    sentence), a ``#`` line where a sentence starts is a comment unless it reads as a token
    line (:class:`Layout`). ``lines``: numbered texts (a :class:`BadLine` is passed on in
    its place); ``tag_column`` None: tokens only; ``check(number, columns)``: called on each
    token line, to refuse it. A ``#`` line before the file's first token line waits for it,
    which says what token lines look like. A token line of another width than the first (a
    line of text among the columns, say) is a :class:`BadLine` in its place, never a token
    read from its first word."""
    document, layout = 0, None
    current = Sentence([], [], document=document)
    waiting: list[tuple[int, list[str]]] = []  # "#" lines before the first token line

    def add(number: int, columns: list[str]) -> None:
        if check is not None:
            check(number, columns)
        if not current.tokens:
            current.line = number
        current.tokens.append(columns[token_column])
        if tag_column is not None:
            current.tags.append(columns[tag_column])

    for number, text in lines:
        if isinstance(text, BadLine):
            yield text
            continue
        columns = text.split()
        if not columns or columns[0] == "-DOCSTART-":
            waiting.clear()  # "#" lines with no token line after them: comments
            if current.tokens:  # a -DOCSTART- without a blank line ends the sentence too
                yield current
            document += bool(columns)
            current = Sentence([], [], document=document)
            continue
        if not current.tokens and columns[0].startswith("#"):
            if layout is None:
                waiting.append((number, columns))
                continue
            if layout.is_comment(columns):
                continue
        if layout is None:
            layout = layout_of(columns, tag_column, plain, number)
            for waited, shape in waiting:
                if not layout.is_comment(shape):
                    add(waited, shape)
            waiting.clear()
        if len(columns) != layout.width:
            found = f"found {len(columns)}: {text.strip()!r}"
            yield BadLine(
                number, f"expected {layout.width} columns (as on line {layout.line}), {found}"
            )
            continue
        add(number, columns)
    if current.tokens:
        yield current


def read_conll(
    path: str | Path, token_column: int = 0, tag_column: int | None = -1, *, plain: bool = False
) -> list[Sentence]:
    """Read a CoNLL file (:func:`parse_conll`'s rules). ``tag_column=None`` reads tokens only
    (for unlabelled input); ``plain`` takes tags as labels of their own (parts of speech), not
    entity tags. Every token line has the columns of the first, and each tag is one of a
    scheme: DataError naming the line otherwise."""
    checked = False  # the first token line's columns hold the token and tag columns

    def check(number: int, columns: list[str]) -> None:
        nonlocal checked
        if not checked:
            checked = True
            _check_column_index(path, number, columns, token_column, tag_column)
        if tag_column is not None and not plain:
            try:
                split_tag(columns[tag_column])
            except ValueError as error:
                raise DataError(path, str(error), number) from None

    sentences = []
    for item in parse_conll(numbered_lines(path), tag_column, plain, token_column, check):
        if isinstance(item, BadLine):
            raise DataError(path, item.problem, item.number)
        sentences.append(item)
    if not sentences:
        raise DataError(
            path, "no sentences found: the file is empty or holds only -DOCSTART- or comments"
        )
    if tag_column is not None and not plain:
        check_one_scheme(sentences, path)
    return sentences


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
