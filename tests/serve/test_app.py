"""bistack serve: the HTTP API answers what bistack predict answers, refuses bad input with a 4xx
that names the problem and keeps answering, groups concurrent requests without making any wait,
tells operators what it does (metrics, request ids, readiness), drains on SIGTERM, and never
binds a port for a model that does not load."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
pytest.importorskip("httpx", reason="the API tests need httpx")

from fastapi.testclient import TestClient

from bistack.files.formats import jsonl_line
from bistack.predictor import load_model
from bistack.serve.app import create_app
from bistack.serve.batcher import ContinuousBatcher
from bistack.serve.served import ServedModel, load_served
from bistack.serve.settings import Limits

LIMITS = Limits(max_body_bytes=4096, max_texts=5, max_chars=200)
CPUS = len(os.sched_getaffinity(0))


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
    assert "/sample" not in schema["paths"]  # the docs list only what a tagger answers


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
    (
        "an option of other kinds",
        {"texts": ["a"], "attention": True},
        400,
        "attention is not an option of",
    ),
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
        assert refused.status_code == 400 and "top_k is not an option" in refused.json()["error"]


def test_concurrent_requests_share_forward_passes():
    calls = []

    def run(texts, options):
        calls.append(list(texts))
        return [f"{text}:{options.get('k', 0)}" for text in texts]

    async def main():
        batcher = ContinuousBatcher(run, max_texts=16)
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
        batcher = ContinuousBatcher(run, max_texts=16)
        await batcher.start()
        jobs = [batcher.submit(["a"], {}), batcher.submit(["bad"], {}), batcher.submit(["b"], {})]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        await batcher.stop()
        return results

    first, failed, last = asyncio.run(main())
    assert first == ["A"] and last == ["B"] and isinstance(failed, ValueError)


def test_an_idle_model_runs_a_request_at_once_and_those_that_wait_form_the_next_pass():
    calls, running, release = [], threading.Event(), threading.Event()

    def run(texts, options):
        calls.append((list(texts), options))
        running.set()
        release.wait(10)
        return [text.upper() for text in texts]

    async def main():
        batcher = ContinuousBatcher(run, max_texts=4)
        await batcher.start()
        first = asyncio.create_task(batcher.submit(["a"], {}))
        for _ in range(1000):  # the lone request is in a pass at once: nothing waited for
            if running.is_set():
                break
            await asyncio.sleep(0.001)
        assert calls == [(["a"], {})]
        later = [  # arrive while that pass runs
            batcher.submit(["b", "c"], {}),
            batcher.submit(["k"], {"top_k": 2}),
            batcher.submit(["d", "e"], {}),  # b, c and d, e fill the cap of 4
            batcher.submit(["f"], {}),
            batcher.submit(["g", "h", "i", "j", "l"], {}),  # more than the cap: alone, whole
        ]
        tasks = [asyncio.create_task(job) for job in later]
        while batcher.depth < len(later):
            await asyncio.sleep(0.001)
        release.set()
        results = await asyncio.gather(first, *tasks)
        await batcher.stop()
        return results

    results = asyncio.run(main())
    assert results == [["A"], ["B", "C"], ["K"], ["D", "E"], ["F"], ["G", "H", "I", "J", "L"]]
    assert calls == [
        (["a"], {}),
        (["b", "c", "d", "e"], {}),  # the oldest waiting leads, with all of its options that fit
        (["k"], {"top_k": 2}),  # options never mix
        (["f"], {}),
        (["g", "h", "i", "j", "l"], {}),
    ]


def metric_samples(text: str) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_parse_and_move_and_every_answer_carries_a_request_id(tagger_client, caplog):
    caplog.set_level(logging.INFO, logger="bistack.serve.access")
    before = metric_samples(tagger_client.get("/metrics").text)
    ok = {"method": "POST", "route": "/predict", "status": "200"}
    ok_key = ("bistack_requests_total", tuple(sorted(ok.items())))
    for _ in range(3):
        response = tagger_client.post("/predict", json={"texts": ["John left .", "Mary came ."]})
        assert response.status_code == 200
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["x-request-id"])
    mine = tagger_client.post(
        "/predict", json={"texts": ["Paris ."]}, headers={"X-Request-ID": "client-7"}
    )
    assert mine.headers["x-request-id"] == "client-7"  # the client's own id, echoed
    refused = tagger_client.post("/predict", json={"texts": []})
    assert refused.status_code == 422 and refused.headers["x-request-id"]
    tagger_client.get("/no/such/page")
    after = metric_samples(tagger_client.get("/metrics").text)
    assert after[ok_key] - before.get(ok_key, 0) == 4
    refused_key = ("bistack_requests_total", tuple(sorted((ok | {"status": "422"}).items())))
    assert after[refused_key] - before.get(refused_key, 0) == 1
    unmatched = {"method": "GET", "route": "unmatched", "status": "404"}
    assert after[("bistack_requests_total", tuple(sorted(unmatched.items())))] == 1
    assert after[("bistack_request_seconds_count", tuple(sorted(ok.items())))] >= 4
    passes, texts, timed, pass_seconds = (
        after[(name, ())] - before.get((name, ()), 0)
        for name in (
            "bistack_pass_texts_count", "bistack_pass_texts_sum",
            "bistack_pass_seconds_count", "bistack_pass_seconds_sum",
        )
    )  # fmt: skip
    assert passes == 4 and texts == 7  # sequential requests: a pass each
    request_seconds = after[("bistack_request_seconds_sum", tuple(sorted(ok.items())))]
    assert timed == 4 and 0 < pass_seconds < request_seconds  # the model's part of their time
    assert after[("bistack_queue_depth", ())] == 0
    assert after[("bistack_model_load_seconds", ())] > 0
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name.endswith("access")]
    line = next(entry for entry in lines if entry["id"] == "client-7")
    assert line["route"] == "/predict" and line["status"] == 200 and line["texts"] == 1
    assert line["method"] == "POST" and line["ms"] > 0


def test_ready_is_false_until_the_model_thread_has_warmed_up(small_tagger, monkeypatch):
    served = load_served(small_tagger)
    warming = threading.Event()
    monkeypatch.setattr(ServedModel, "warm", lambda self: warming.wait(10))
    with TestClient(create_app(served, LIMITS)) as client:
        not_yet = client.get("/ready")
        assert not_yet.status_code == 503 and not_yet.json() == {"ready": False}
        assert client.get("/health").json()["status"] == "ok"  # alive all the while
        warming.set()
        for _ in range(500):
            if client.get("/ready").status_code == 200:
                break
            time.sleep(0.01)
        assert client.get("/ready").json() == {"ready": True}


SLOW_SERVER = """
import sys, time
from bistack.serve.settings import Limits
from bistack.serve.served import ServedModel, load_served
from bistack.serve.server import serve


class Slow(ServedModel):  # every pass takes a while, so requests are surely waiting when signalled
    def predict(self, texts, options):
        time.sleep(0.4)
        return super().predict(texts, options)


base = load_served(sys.argv[1])
slow = Slow(base.opened, base.info, base.load_seconds)
serve(slow, "127.0.0.1", 0, Limits(), sys.argv[1], access_log=True)
"""


def test_sigterm_stops_accepting_answers_every_accepted_request_and_exits_0(small_tagger, tmp_path):
    httpx = pytest.importorskip("httpx")
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER)
    server = subprocess.Popen(
        [sys.executable, str(script), str(small_tagger)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = re.search(r"http://[\d.]+:\d+", server.stdout.readline()).group(0)
        with httpx.Client(base_url=url, timeout=30) as probe:
            while probe.get("/ready").status_code != 200:
                time.sleep(0.05)
        burst = 10
        texts = [[f"John visited Paris {i} times ."] for i in range(burst)]
        answers: list = [None] * burst

        def send(index: int) -> None:
            with httpx.Client(base_url=url, timeout=30) as client:
                body = {"texts": texts[index]}
                headers = {"X-Request-ID": f"burst-{index}"}
                answers[index] = client.post("/predict", json=body, headers=headers)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(burst)]
        for thread in threads:
            thread.start()
        with httpx.Client(base_url=url, timeout=30) as probe:  # every request accepted
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                health = probe.get("/health").json()  # one text a request
                if health["waiting"] + health["running"] + health["texts"] >= burst:
                    break
                time.sleep(0.01)
        server.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        with pytest.raises(httpx.ConnectError):  # no longer accepting
            httpx.get(url + "/health", timeout=5)
        for thread in threads:
            thread.join(60)
        _, stderr = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode == 0, stderr
    for index, answer in enumerate(answers):
        assert answer is not None and answer.status_code == 200, (index, answer)
        assert answer.headers["x-request-id"] == f"burst-{index}"
        [record] = answer.json()["predictions"]
        assert record["text"] == texts[index][0]
    assert "stopped on SIGTERM" in stderr
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert {entry["id"] for entry in logged} >= {f"burst-{i}" for i in range(burst)}


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def worker_processes(pid: int) -> list[int]:
    """The processes ``serve --workers`` started (multiprocessing's resource tracker aside)."""
    return [p for p in children_of(pid)
            if "resource_tracker" not in Path(f"/proc/{p}/cmdline").read_text()]  # fmt: skip


def connected(url: str, count: int) -> list[socket.socket]:
    """``count`` connections to the server at ``url``, all made before it answers any."""
    host, port = url.removeprefix("http://").split(":")
    return [socket.create_connection((host, int(port)), timeout=30) for _ in range(count)]


def health_worker(url: str, sock: socket.socket) -> int:
    """The worker process that answers ``GET /health`` on the connection ``sock``."""
    with sock, sock.makefile("rb") as answer:
        sock.sendall(
            f"GET /health HTTP/1.1\r\nHost: {url[7:]}\r\nConnection: close\r\n\r\n".encode()
        )
        return json.loads(answer.read().split(b"\r\n\r\n", 1)[1])["worker"]


def test_workers_serve_one_port_count_together_and_stop_on_sigterm(small_tagger):
    httpx = pytest.importorskip("httpx")
    command = [sys.executable, "-m", "bistack", "serve", str(small_tagger), "--port", "0"]
    server = subprocess.Popen(
        [*command, "--workers", "2", "--threads", "1", "--no-access-log"],  # stderr: read last
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = server.stdout.readline()
        assert "2 worker processes of 1 thread each" in line, line
        url = re.search(r"http://[\d.]+:\d+", line).group(0)
        deadline = time.monotonic() + 120
        ready = 0
        while ready < 20 and time.monotonic() < deadline:  # a fresh connection each: both
            try:  # workers take some, and each says ready only once warmed
                ready = ready + 1 if httpx.get(url + "/ready").status_code == 200 else 0
            except httpx.TransportError:
                time.sleep(0.1)
        assert ready == 20
        workers = worker_processes(server.pid)
        assert len(workers) == 2, workers
        # 32 connections made while no worker can accept any (a burst from a load generator):
        # each worker takes a share (one listening socket shared by both let the first worker
        # to wake accept them all). Both get at least 4 unless the kernel's hash is 1 in 10^6.
        for pid in workers:
            os.kill(pid, signal.SIGSTOP)
        try:
            waiting = connected(url, 32)
        finally:
            for pid in workers:
                os.kill(pid, signal.SIGCONT)
        served_by = collections.Counter(health_worker(url, sock) for sock in waiting)
        assert sorted(served_by) == sorted(workers) and min(served_by.values()) >= 4, served_by
        # The supervisor checked the model in a process of its own: it holds no copy, no torch.
        assert "libtorch" not in Path(f"/proc/{server.pid}/maps").read_text()
        texts = ["John visited Paris yesterday.", "Mary left New York ."]
        want = [json.loads(jsonl_line(p)) for p in load_model(small_tagger).predict(texts)]
        for _ in range(10):
            answer = httpx.post(url + "/predict", json={"texts": texts})
            assert answer.json()["predictions"] == want
        samples = metric_samples(httpx.get(url + "/metrics").text)
        ok = {"method": "POST", "route": "/predict", "status": "200"}
        assert samples[("bistack_requests_total", tuple(sorted(ok.items())))] == 10  # both
        assert samples[("bistack_pass_texts_sum", ())] == 20  # the warm-ups are not traffic
        # Where the workers' metrics meet; a worker's live queue depth is a file of its own.
        environ = Path(f"/proc/{workers[1]}/environ").read_bytes().split(b"\0")
        folder = Path(
            next(v for v in environ if v.startswith(b"PROMETHEUS_MULTIPROC_DIR="))
            .decode()
            .split("=", 1)[1]
        )
        depth_file = folder / f"gauge_livesum_{workers[0]}.db"
        assert depth_file.exists()
        os.kill(workers[0], signal.SIGKILL)  # a worker that dies is replaced, the port kept
        while workers[0] in (live := worker_processes(server.pid)) or len(live) < 2:
            assert time.monotonic() < deadline, live
            time.sleep(0.1)
        # The dead worker's queue depth no longer counts in /metrics' sum of live workers.
        assert not depth_file.exists()
        served_by = set()
        while len(served_by) < 2 and time.monotonic() < deadline:  # once the new one serves
            served_by |= {health_worker(url, sock) for sock in connected(url, 8)}
            time.sleep(0.2)
        assert workers[1] in served_by and workers[0] not in served_by, (served_by, workers)
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    finally:
        server.kill()
    assert server.returncode == 0, stderr
    assert "every request accepted was answered" in stderr
    workers += live
    # Nothing left behind for the resource tracker (the model check's pool and the workers'
    # progress-bar locks each left a named semaphore, warned of at shutdown).
    assert "leaked" not in stderr, stderr
    assert not [p for p in workers if Path(f"/proc/{p}").exists()]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_model_that_does_not_load_stops_serve_before_it_binds(tmp_path, workers):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bistack",
            "serve",
            str(broken),
            "--port",
            str(port),
            "--workers",
            workers,
            "--threads",
            "1",
        ],
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


@pytest.mark.parametrize(
    ("flags", "workers", "threads"),
    [
        ([], min(CPUS, 8), 1),  # the default: a process per CPU, one torch thread each
        (["--workers", "1"], 1, 1),
        (["--workers", "1", "--threads", "2"], 1, 2),
        (["--ray", "--replicas", "2"], 1, 1),
    ],
)
def test_serve_fits_the_machine_by_default(flags, workers, threads, monkeypatch):
    from bistack.cli import build_parser, configure_threads
    from bistack.cli.serve import settings_of

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("torch.set_num_threads", lambda n: None)  # this process keeps its own
    args = build_parser().parse_args(["serve", "some/model", *flags])
    configure_threads(args)
    settings = settings_of(args, args.threads)
    assert (settings.processes(CPUS) if not settings.ray else 1, args.threads) == (
        workers,
        threads,
    )


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


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--replicas", "2"], "--replicas is for Ray Serve (--ray); here say --workers"),
        (["--ray", "--workers", "2"], "--workers is for serving here; on Ray Serve say --replicas"),
    ],
)
def test_flags_of_the_other_way_to_scale_are_refused_before_the_model_loads(
    flags, message, capsys, monkeypatch
):
    from bistack.cli import main

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as `make test` runs: no warning of threads

    assert main(["serve", "no/such/model", *flags]) == 2  # the model is not even looked at
    assert capsys.readouterr().err == f"error: {message}\n"


@pytest.mark.parametrize("value", [True, "0.5", "yes", [0.5]])
def test_an_option_takes_the_values_the_command_line_takes_and_no_others(tagger_client, value):
    """``"min_confidence": true`` is not 1.0 (which would drop every entity), nor is "0.5" a
    number: every face refuses what the command line refuses."""
    answer = tagger_client.post("/predict", json={"texts": ["John ."], "min_confidence": value})
    assert answer.status_code == 422 and "min_confidence" in answer.json()["error"]
    assert (
        tagger_client.post("/predict", json={"texts": ["John ."], "top_k": 2.0}).status_code == 422
    )
    ok = tagger_client.post("/predict", json={"texts": ["John ."], "min_confidence": 1})
    assert ok.status_code == 200  # an integer is a number
