"""bistack serve --ray: two Ray Serve replicas on this machine answer what bistack serve answers,
body for body, and stop on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="serving needs the serve extra (bistack[serve])")
pytest.importorskip("ray.serve", reason="serving on Ray needs bistack[ray-serve]")
pytest.importorskip("httpx", reason="the API tests need httpx")

import httpx
from fastapi.testclient import TestClient

from bistack.serve.app import create_app
from bistack.serve.served import load_served

REQUESTS = [
    {"texts": ["John visited Paris yesterday.", "Mary left New York ."]},
    {"texts": ["John visited Paris yesterday."], "top_k": 2},
    {"texts": ["Mary left New York ."], "min_confidence": 0.5},
    {"texts": []},  # refused alike
    {"texts": ["a"], "attention": True},  # an option taggers lack: refused alike
]


@pytest.mark.slow
def test_two_ray_serve_replicas_answer_what_bistack_serve_answers(small_tagger):
    command = [sys.executable, "-m", "bistack", "serve", str(small_tagger), "--ray"]
    server = subprocess.Popen(
        [*command, "--replicas", "2", "--threads", "1", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = server.stdout.readline()  # said once the replicas are up
        match = re.search(r"http://[\d.]+:\d+", line)
        assert match and "2 Ray Serve replicas" in line, (line, server.stderr.read())
        url = match.group(0)
        with TestClient(create_app(load_served(small_tagger))) as here:
            for body in REQUESTS:
                want = here.post("/predict", json=body)
                got = httpx.post(url + "/predict", json=body, timeout=60)
                assert (got.status_code, got.json()) == (want.status_code, want.json()), body
            assert httpx.get(url + "/info").json() == here.get("/info").json()
        workers = {httpx.get(url + "/health").json()["worker"] for _ in range(30)}
        assert len(workers) == 2, workers  # both replicas took requests
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=180)
    finally:
        server.kill()
    assert server.returncode == 0, stderr
