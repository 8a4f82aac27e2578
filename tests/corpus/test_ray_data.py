"""Ray Data as the engine past one machine: a bistack model in ``map_batches`` on a local Ray
instance predicts a Parquet file's rows as ``bistack predict`` does, for a tagger, a classifier
and a regressor (the same code runs on a cluster after ``ray.init(address=...)``)."""

from __future__ import annotations

import json

import pytest

from bistack.cli import main

ray = pytest.importorskip(
    "ray", reason="the Ray test needs the ray extra: pip install 'bistack[ray]'"
)
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

TEXTS = [
    "Anna visited Paris yesterday .",
    "the film was great and the acting lovely",
    "",
    "Peter left New York",
    "a dull plot , boring and clumsy",
] * 9


def rounded(value):
    """JSON values with floats to 4 places: another batch or thread count sums in another
    order."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.mark.parametrize("model", ["small_tagger", "small_classifier", "small_regressor"])
def test_map_batches_predicts_what_bistack_predict_does(local_ray, model, request, tmp_path,
                                                        capsys):  # fmt: skip
    from bistack.corpus.ray_data import Predictions

    model_dir = str(request.getfixturevalue(model))
    source = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"id": list(range(len(TEXTS))), "body": TEXTS}), source)
    capsys.readouterr()
    assert main(["predict", model_dir, "--input", str(source), "--text-field", "body",
                 "--format", "jsonl"]) == 0  # fmt: skip
    # bistack predict's records carry their row; a Ray batch's rows are the Dataset's own.
    expected = [
        {k: v for k, v in json.loads(line).items() if k != "row"}
        for line in capsys.readouterr().out.splitlines()
    ]
    predicted = ray.data.read_parquet(str(source)).map_batches(
        Predictions,
        fn_constructor_kwargs={"model": model_dir, "text_column": "body"},
        batch_size=16,
        concurrency=1,  # one actor of one core, and the other core reads the Parquet file
        num_cpus=1,
        batch_format="pandas",
    )
    rows = sorted(predicted.take_all(), key=lambda row: row["id"])
    assert [row["body"] for row in rows] == TEXTS
    assert all(row["prediction_error"] is None for row in rows)
    got = [json.loads(row["prediction"]) for row in rows]
    assert rounded(got) == rounded(expected)


def test_a_row_without_text_is_reported_not_dropped(small_classifier):
    import pandas as pd

    from bistack.corpus.ray_data import Predictions

    predict = Predictions(str(small_classifier))
    batch = predict(pd.DataFrame({"text": ["a great film", None]}))
    assert batch["prediction"][1] is None and "null, not a text" in batch["prediction_error"][1]
    assert json.loads(batch["prediction"][0])["text"] == "a great film"
    with pytest.raises(Exception, match="no column 'body'"):
        Predictions(str(small_classifier), text_column="body")(pd.DataFrame({"text": ["x"]}))


def test_cv_on_ray_gives_what_one_process_gives(local_ray, tmp_path, monkeypatch):
    """``bistack cv --ray [ADDRESS]``: each fold a Ray task (here on the local Ray this module
    started), the outputs those of folds trained one after another with one thread each."""
    from tests.cv.test_cross_validation import cv, write_config, write_rows

    config = write_config(tmp_path, write_rows(tmp_path / "train.tsv", 30))
    assert cv(config, tmp_path / "here", "--folds", "2", "--threads", "1") == 0
    assert cv(config, tmp_path / "ray", "--folds", "2", "--threads", "1", "--ray") == 0
    for name in ("folds.json", "oof.jsonl", "oof.csv", "cv.json"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
    # The cluster named by its address (here the one this process joined already, so the
    # joining is watched, not done again): the address reaches Ray, the outputs are the same.
    address = ray.get_runtime_context().gcs_address
    joined, real = [], ray.is_initialized

    def join(address: str | None = None, **settings) -> None:
        joined.append(address)
        monkeypatch.setattr(ray, "is_initialized", real)  # joined: Ray's own calls see it so

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", join)
    flags = ["--folds", "2", "--threads", "1", "--ray", address]
    assert cv(config, tmp_path / "named", *flags) == 0
    assert joined == [address]
    for name in ("folds.json", "oof.jsonl", "oof.csv", "cv.json"):
        assert (tmp_path / "named" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
