"""Predict a corpus with Ray Data: on this machine, or on a running Ray cluster.

    python examples/ray_predict.py MODEL_DIR INPUT OUTPUT_DIR [--address auto] [--actors 2]

INPUT is a Parquet file or folder with a ``text`` column (``--text-column`` names another), or
a text file with one text a line. OUTPUT_DIR gets Parquet files: the input's columns plus
``prediction`` (the record ``bistack predict --format jsonl`` prints, as JSON) and
``prediction_error`` (why a row has none). With ``--address auto`` (or ``ray://HOST:10001``)
the same script runs on a cluster: every node needs bistack installed and MODEL_DIR at the same
path (a shared filesystem or object store), and Ray spreads the actors over the nodes.
"""

from __future__ import annotations

import argparse

import ray

from bistack.corpus.ray_data import Predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--address", help="a running cluster (auto, ray://HOST:10001)")
    parser.add_argument("--actors", type=int, default=1, help="model copies, one core each")
    parser.add_argument("--text-column", default="text")
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()

    if args.address:
        ray.init(address=args.address)
    else:  # a local instance: the actors' cores, and one for reading and writing
        ray.init(num_cpus=args.actors + 1, include_dashboard=False, log_to_driver=False)
    if args.input.endswith((".txt", ".text")):
        texts = ray.data.read_text(args.input)  # one row a line, in column "text"
    else:
        texts = ray.data.read_parquet(args.input)
    predicted = texts.map_batches(
        Predictions,
        fn_constructor_kwargs={"model": args.model, "text_column": args.text_column},
        batch_size=args.batch_size,
        concurrency=args.actors,
        num_cpus=1,  # one thread per copy: two copies of one thread outrun one of two
        batch_format="pandas",
    )
    predicted.write_parquet(args.output)
    written = ray.data.read_parquet(args.output).count()  # from the files' metadata
    print(f"wrote predictions for {written:,} texts to {args.output}")


if __name__ == "__main__":
    main()
