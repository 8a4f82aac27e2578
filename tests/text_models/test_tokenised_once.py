"""A fine-tuned backbone reads the same training texts every epoch: each is tokenised once a
run, not once an epoch (counted at the tokenizer)."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from bistack.cli import main
from bistack.data.splits import split_off_dev
from bistack.data.tables import read_table
from bistack.tasks import config_from_dict
from tests.fixtures.written_models.make_fixtures import configs, write_data

pytest.importorskip("transformers", reason="the layer kinds need bistack[transformers]")


def test_each_training_text_is_tokenised_once_a_run(tmp_path, monkeypatch, capsys):
    from tokenizers import Tokenizer

    write_data(tmp_path / "out", tmp_path)
    config = configs(tmp_path)["tiny_layer_regressor"]
    config["backbone"] = {**config["backbone"], "finetune": True}
    config["train"] = {**config["train"], "max_epochs": 3, "patience": 3}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    read: Counter[str] = Counter()
    original = Tokenizer.encode_batch

    def counted(self, inputs, *args, **kwargs):
        read.update(inputs)
        return original(self, inputs, *args, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode_batch", counted)
    argv = ["train", str(path), "--output", str(tmp_path / "run"), "--no-progress"]
    assert main(argv) == 0, capsys.readouterr().err
    data = config_from_dict(config).data
    rows = read_table(data.train, data.text_column, data.label_columns)
    train, dev = split_off_dev(rows, data.dev_fraction, data.split_seed)
    scored = {row.text for row in dev}  # dev is scored each epoch, from its own texts
    times = Counter(row.text for row in train if row.text not in scored)
    assert times and all(read[text] == count for text, count in times.items())
