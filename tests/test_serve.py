"""bistack serve: the HTTP API answers what bistack predict answers, refuses bad input with a 4xx
that names the problem and keeps answering, groups concurrent requests, and never binds a port
for a model that does not load."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
pytest.importorskip("httpx", reason="the API tests need httpx")

from fastapi.testclient import TestClient

from bistack.formats import jsonl_line
from bistack.serve.app import Limits, create_app
from bistack.serve.batcher import MicroBatcher
from bistack.serve.served import load_served
from bistack.tasks import load_model

LIMITS = Limits(max_body_bytes=4096, max_texts=5, max_chars=200)


@pytest.fixture
def tagger_client(small_tagger):
    with TestClient(create_app(load_served(small_tagger), LIMITS)) as client:
        yield client


def test_predict_returns_the_records_bistack_predict_writes(tagger_client, small_tagger):
    texts = ["John visited Paris yesterday.", "Mary left New York ."]
    response = tagger_client.post("/predict", json={"texts": texts})
    assert response.status_code == 200
    records = response.json()["predictions"]
    expected = [json.loads(jsonl_line(p)) for p in load_model(small_tagger).predict(texts)]
    assert records == expected
    assert {e["type"] for r in records for e in r["entities"]} >= {"PER", "LOC"}
    # The options predict has for this kind work here too.
    top = tagger_client.post("/predict", json={"texts": texts[:1], "top_k": 2}).json()
    assert len(top["predictions"][0]["alternatives"][0]) == 2


def test_info_and_health_describe_the_model(tagger_client):
    info = tagger_client.get("/info").json()
    assert info["kind"] == "tagger" and info["view"] == "entities"
    assert info["scheme"] == "IOB1" and info["entity_types"] == ["LOC", "PER"]
    assert info["options"] == ["min_confidence", "top_k"]
    assert info["config"]["encoder"]["bidirectional"] is True
    assert tagger_client.get("/health").json()["status"] == "ok"
    schema = tagger_client.get("/openapi.json").json()
    assert "/predict" in schema["paths"] and "PredictRequest" in schema["components"]["schemas"]


BAD = [
    ("an empty list", {"texts": []}, 422, "texts: the list is empty"),
    ("an empty text", {"texts": ["ok", ""]}, 422, "texts[1]: the text is empty"),
    ("a whitespace text", {"texts": [" \t\n"]}, 422, "texts[0]: the text is empty"),
    ("a string, not a list", {"texts": "John left"}, 422, "texts: Input should be a valid list"),
    ("a number in the list", {"texts": [3]}, 422, "texts.0: Input should be a valid string"),
    ("no texts", {}, 422, "texts: required"),
    ("a list body", ["John"], 422, "must be a JSON object"),
    ("too many texts", {"texts": ["a"] * 6}, 413, "more than the 5 allowed per request"),
    ("a text too long", {"texts": ["a" * 201]}, 413, "texts[0]: 201 characters"),
    ("an unknown option", {"texts": ["a"], "beam": 3}, 422, "beam: unknown field"),
    ("an option of other kinds", {"texts": ["a"], "attention": True}, 400, "attention: not an"),
    ("a confidence over 1", {"texts": ["a"], "min_confidence": 2}, 422, "min_confidence:"),
]


@pytest.mark.parametrize(("name", "body", "status", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_gets_a_4xx_naming_the_problem(tagger_client, name, body, status, message):
    response = tagger_client.post("/predict", json=body)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    # The server keeps answering.
    assert tagger_client.post("/predict", json={"texts": ["John left ."]}).status_code == 200


def test_raw_bodies_that_are_not_json_or_too_large_get_a_4xx(tagger_client):
    headers = {"content-type": "application/json"}
    response = tagger_client.post("/predict", content=b"{texts: nope", headers=headers)
    assert response.status_code == 422 and "not valid JSON" in response.json()["error"]
    response = tagger_client.post("/predict", content=b"\xff\xfe", headers=headers)
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
    big = json.dumps({"texts": ["a" * 5000]}).encode()
    response = tagger_client.post("/predict", content=big, headers=headers)
    assert response.status_code == 413 and "larger than the 4096 bytes" in response.json()["error"]
    # Chunked, with no Content-Length to go by: counted as it arrives.
    response = tagger_client.post(
        "/predict", content=iter([big[:3000], big[3000:]]), headers=headers
    )
    assert response.status_code == 413
    assert tagger_client.post("/predict", json={"texts": ["Mary left ."]}).status_code == 200
    assert tagger_client.post("/sample", json={"prompt": "x"}).status_code == 400


def test_a_classifier_returns_probabilities_and_attention(small_classifier):
    with TestClient(create_app(load_served(small_classifier), LIMITS)) as client:
        body = {"texts": ["the acting was superb", "a dull plot"], "attention": True}
        records = client.post("/predict", json=body).json()["predictions"]
        model = load_model(small_classifier)
        expected = model.predict(body["texts"], attention=True)
        assert records == [json.loads(jsonl_line(p)) for p in expected]
        assert sum(records[0]["probabilities"].values()) == pytest.approx(1.0)
        assert [t["text"] for t in records[0]["attention"]] == ["the", "acting", "was", "superb"]
        refused = client.post("/predict", json={"texts": ["a"], "top_k": 2})
        assert refused.status_code == 400 and "top_k: not an option" in refused.json()["error"]


def test_concurrent_requests_share_forward_passes():
    calls = []

    def run(texts, options):
        calls.append(list(texts))
        return [f"{text}:{options.get('k', 0)}" for text in texts]

    async def main():
        batcher = MicroBatcher(run, window=0.05, max_texts=16)
        await batcher.start()
        requests = [([f"t{i}", f"u{i}"], {"k": i % 2}) for i in range(20)]
        results = await asyncio.gather(*(batcher.submit(t, o) for t, o in requests))
        await batcher.stop()
        return requests, results

    requests, results = asyncio.run(main())
    for (texts, options), result in zip(requests, results, strict=True):
        assert result == [f"{text}:{options['k']}" for text in texts]  # each gets its own
    assert len(calls) < len(requests)  # grouped...
    assert max(len(c) for c in calls) <= 16  # ...within the cap


def test_one_bad_request_in_a_batch_does_not_fail_the_others():
    def run(texts, options):
        if "bad" in texts:
            raise ValueError("bad text")
        return [text.upper() for text in texts]

    async def main():
        batcher = MicroBatcher(run, window=0.05, max_texts=16)
        await batcher.start()
        jobs = [batcher.submit(["a"], {}), batcher.submit(["bad"], {}), batcher.submit(["b"], {})]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        await batcher.stop()
        return results

    first, failed, last = asyncio.run(main())
    assert first == ["A"] and last == ["B"] and isinstance(failed, ValueError)


def test_a_model_that_does_not_load_stops_serve_before_it_binds(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = subprocess.run(
        [sys.executable, "-m", "bistack.cli", "serve", str(broken), "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "config.json" in run.stderr
    assert "serving" not in run.stdout
    with socket.socket() as probe:  # the port was never taken
        probe.bind(("127.0.0.1", port))


def assert_close(got, want) -> None:
    if isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-5)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            assert_close(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert_close(a, b)
    else:
        assert got == want


def test_serve_binds_to_this_machine_only_by_default():
    from bistack.cli import build_parser

    args = build_parser().parse_args(["serve", "some/model"])
    assert args.host == "127.0.0.1"


def test_an_exported_model_is_served_too(small_tagger, tmp_path):
    pytest.importorskip("onnxruntime", reason="exported models run on onnxruntime")
    from bistack.cli import main

    output = tmp_path / "onnx"
    assert main(["export", str(small_tagger), "--output", str(output)]) == 0
    with TestClient(create_app(load_served(output), LIMITS)) as client:
        info = client.get("/info").json()
        assert info["exported"] is True and info["kind"] == "tagger"
        assert info["view"] == "entities" and info["options"] == ["min_confidence", "top_k"]
        texts = ["John visited Paris yesterday."]
        # The PyTorch model's records, confidences and options included (to float precision).
        pytorch = load_model(small_tagger)
        for options in ({}, {"min_confidence": 0.5}, {"top_k": 2}):
            body = {"texts": texts} | options
            records = client.post("/predict", json=body).json()["predictions"]
            want = [p.to_json() for p in pytorch.predict(texts, **options)]
            assert_close(records, want)
