import torch

from bistack.data.batching import collate_tagging
from bistack.data.buckets import bucket_batches
from bistack.data.features import CASINGS, TokenVocabularies, casing_class
from bistack.data.tokenize import tokenize, whitespace_tokenize
from bistack.data.vocab import Vocabulary


def test_casing_classes():
    names = {
        t: CASINGS[casing_class(t) - 1] for t in ["1796", "12a", "the", "EU", "Peter", "x1y2z", "-"]
    }
    assert names == {
        "1796": "numeric",
        "12a": "mainly_numeric",
        "the": "lower",
        "EU": "upper",
        "Peter": "title",
        "x1y2z": "lower",
        "-": "other",
    }


def test_vocabulary_min_freq_unknown_and_json_round_trip():
    vocab = Vocabulary.build(["a", "b", "a", "c", "a", "b"], min_freq=2)
    assert vocab.items == ["<pad>", "<unk>", "a", "b"]
    assert vocab.lookup("c") == 1
    assert Vocabulary.from_json(vocab.to_json()).items == vocab.items


def test_words_are_lowercased_and_digits_normalised():
    vocabularies = TokenVocabularies.build(
        [(["Paris", "1796"], ["I-LOC", "O"])], min_freq=1, lowercase=True, normalise_digits=True
    )
    encoded = vocabularies.encode(["PARIS", "1815"])
    assert encoded.words == (vocabularies.words.lookup("paris"), vocabularies.words.lookup("0000"))
    assert encoded.words[0] > 1 and encoded.words[1] > 1
    assert encoded.casing != vocabularies.encode(["paris", "1815"]).casing


def test_bucketed_batches_cover_every_sentence_once_and_group_similar_lengths():
    lengths = [((i * 37) % 50) + 1 for i in range(1000)]
    batches = bucket_batches(lengths, 10, shuffle=True, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches)
    assert spread / len(batches) < 3
    ordered = bucket_batches(lengths, 10, shuffle=False)
    assert [lengths[i] for b in ordered for i in b] == sorted(lengths)


def test_collate_pads_and_shares_characters_of_repeated_words():
    vocabularies = TokenVocabularies.build(
        [(["the", "cat", "the"], ["O", "O", "O"])],
        min_freq=1,
        lowercase=False,
        normalise_digits=False,
    )
    batch = collate_tagging(
        [
            vocabularies.encode(["the", "cat", "the"], ["O"] * 3),
            vocabularies.encode(["cat"], ["O"]),
        ],
        vocabularies,
    )
    assert batch.mask.tolist() == [[True, True, True], [True, False, False]]
    assert batch.tags.tolist() == [[0, 0, 0], [0, -100, -100]]
    assert batch.chars.shape == (2, 3)  # two distinct words
    assert batch.char_index[0, 0] == batch.char_index[0, 2]
    assert torch.equal(batch.char_lengths, torch.tensor([3, 3]))


def test_tokenize_keeps_offsets_and_splits_sentences():
    text = 'Washington signed the treaty in 1796. The U.S. Army said "no".'
    sentences = tokenize(text)
    assert [t.text for t in sentences[0]] == [
        "Washington",
        "signed",
        "the",
        "treaty",
        "in",
        "1796",
        ".",
    ]
    assert [t.text for t in sentences[1]][:3] == ["The", "U.S.", "Army"]
    for sentence in sentences:
        for token in sentence:
            assert text[token.start : token.end] == token.text
    assert [t.text for t in whitespace_tokenize(" a  good film ")] == ["a", "good", "film"]
