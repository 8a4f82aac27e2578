"""An ``--output`` whose suffix names a format the model does not write (a classifier's
``sub.csv``) is refused before anything is written, naming the formats it does write; never
filled with JSON lines under that name."""

import json

import pytest

from bistack.cli import main


@pytest.mark.parametrize("name", ["sub.csv", "sub.tsv", "sub.parquet", "sub.json", "sub.conll"])
def test_a_suffix_naming_a_format_the_model_does_not_write_is_refused(
    small_classifier, tmp_path, capsys, name
):
    output = tmp_path / name
    assert main(["predict", str(small_classifier), "a fine film", "--output", str(output)]) == 2
    said = capsys.readouterr().err
    assert f"--output {output}: its suffix names" in said and "it writes jsonl" in said
    assert not output.exists()


def test_a_suffix_naming_no_format_takes_the_default_and_jsonl_its_own(
    small_classifier, tmp_path, capsys
):
    for name in ("out.txt", "out.jsonl"):
        output = tmp_path / name
        assert main(["predict", str(small_classifier), "a fine film", "--output", str(output)]) == 0
        assert "label" in json.loads(output.read_text().splitlines()[0])
    capsys.readouterr()
