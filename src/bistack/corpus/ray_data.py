"""A bistack model as a step of a Ray Data pipeline, to predict a corpus on a cluster.

``Predictions`` is a callable class for ``ray.data.Dataset.map_batches``: Ray starts it once per
actor, so the model is loaded once per actor, and calls it on batches (pandas, pyarrow or numpy
batch formats). Each row gains the record ``bistack predict --format jsonl`` prints for its
text, as a JSON string (one Arrow type for every kind and option), and the reason when it has
none::

    import ray
    from bistack.corpus.ray_data import Predictions

    ray.init()  # or ray.init(address="auto") on a cluster
    texts = ray.data.read_parquet("corpus.parquet")
    predicted = texts.map_batches(
        Predictions,
        fn_constructor_kwargs={"model": "runs/conll03/model", "text_column": "text"},
        batch_size=1024,
        concurrency=4,  # actors, each with the model loaded once
        num_cpus=1,  # one core each: several one-thread models outrun one many-thread model
        batch_format="pandas",
    )
    predicted.write_parquet("predictions/")

Taggers, classifiers and regressors (and their exported forms) all work; a column of token
lists gives a tagger pre-tokenised sentences. Needs ``pip install 'bistack[ray]'``.
"""

from __future__ import annotations

from typing import Any

from bistack.corpus.sources import from_value
from bistack.errors import ConfigError
from bistack.inputs import Record
from bistack.predictor import Failed, open_model


class Predictions:
    """Adds ``output_column`` (the prediction record as JSON, or None) and ``error_column``
    (why a row has none, or None) to each batch; ``options`` are ``predict``'s keywords, those
    the model's kind declares (``min_confidence``, ``top_k``, ``attention``...), checked as the
    command line checks them."""

    def __init__(
        self,
        model: str,
        text_column: str = "text",
        output_column: str = "prediction",
        error_column: str = "prediction_error",
        **options: Any,
    ) -> None:
        self.model = open_model(model)
        self.fmt, self.options = self.model.card.checked_request("jsonl", options)
        self.text_column, self.output_column = text_column, output_column
        self.error_column = error_column

    def _record(self, value: Any, row: int) -> Record:
        if hasattr(value, "tolist"):  # a numpy array of tokens
            value = value.tolist()
        if isinstance(value, float) and value != value:  # pandas writes a missing text as NaN
            value = None
        return from_value(value, self.text_column, "column", row=row)

    def __call__(self, batch: Any) -> Any:
        """``batch`` (a pandas DataFrame, a pyarrow Table, or a dict of numpy arrays) with the
        two columns added."""
        texts = _column(batch, self.text_column)
        records = [self._record(value, row) for row, value in enumerate(texts, start=1)]
        outcomes = self.model.predict_records(records, self.fmt, self.options)
        predictions = [None if isinstance(o, Failed) else o.rstrip("\n") for o in outcomes]
        errors = [o.reason if isinstance(o, Failed) else None for o in outcomes]
        return _with_columns(batch, {self.output_column: predictions, self.error_column: errors})


def _column(batch: Any, name: str) -> list[Any]:
    try:
        values = batch[name]
    except KeyError:
        columns = list(batch.column_names if hasattr(batch, "column_names") else batch.keys())
        raise ConfigError(
            f"the batch has no column {name!r} (columns: {', '.join(map(str, columns))}); "
            "pass text_column in fn_constructor_kwargs"
        ) from None
    return values.to_pylist() if hasattr(values, "to_pylist") else list(values)


def _with_columns(batch: Any, columns: dict[str, list[Any]]) -> Any:
    if hasattr(batch, "append_column"):  # pyarrow.Table
        import pyarrow as pa

        for name, values in columns.items():
            batch = batch.append_column(name, pa.array(values, pa.string()))
        return batch
    if hasattr(batch, "assign"):  # pandas.DataFrame: object columns, so that None stays None
        import pandas as pd

        return batch.assign(
            **{k: pd.Series(v, index=batch.index, dtype=object) for k, v in columns.items()}
        )
    import numpy as np

    return {**batch, **{name: np.array(values, dtype=object) for name, values in columns.items()}}
