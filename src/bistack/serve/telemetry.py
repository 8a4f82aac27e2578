"""What operators see of ``bistack serve``: Prometheus metrics at ``GET /metrics``, a request id
on every response, and one JSON access-log line per request.

The metrics come from ``prometheus-client`` (the exposition format is its to get right), in a
registry of the app's own, so two apps in one process (the tests) count apart; under ``serve
--workers N`` they are ``shared``: every worker writes to the folder ``PROMETHEUS_MULTIPROC_DIR``
names (set by the command line) and whichever worker answers ``/metrics`` reports them all:

- ``bistack_requests_total{route,method,status}`` and ``bistack_request_seconds{...}`` (a
  histogram), by the route's template (``/predict``), never the raw path, so a scan of random
  URLs cannot grow the label set (those count as ``route="unmatched"``);
- ``bistack_pass_texts``: a histogram of the texts in each forward pass;
- ``bistack_pass_seconds``: a histogram of each forward pass's time on the model's thread (a
  request's latency less this is what the server itself and the wait for a pass cost);
- ``bistack_queue_depth``: requests waiting for a pass (in all workers);
- ``bistack_model_load_seconds``: how long opening the model (and its first pass) took (the
  slowest worker's).

The request id is the client's ``X-Request-ID`` when it sent a sensible one (up to 128 visible
ASCII characters), a fresh one otherwise; it is echoed in the response's ``X-Request-ID`` and in
the access line, so a client's complaint can be found in the log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

ACCESS_LOG = logging.getLogger("bistack.serve.access")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PASS_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Metrics:
    """The server's Prometheus metrics: in a registry of their own, or ``shared`` by the worker
    processes in prometheus-client's multiprocess folder."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, load_seconds: float, shared: bool = False) -> None:
        self.registry = None if shared else CollectorRegistry()
        labels = ("route", "method", "status")
        self.requests = Counter(
            "bistack_requests", "HTTP requests answered", labels, registry=self.registry
        )
        self.latency = Histogram(
            "bistack_request_seconds",
            "Time from a request's arrival to its answer",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.pass_texts = Histogram(
            "bistack_pass_texts",
            "Texts in each forward pass of the model",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.pass_seconds = Histogram(
            "bistack_pass_seconds",
            "Time of each forward pass on the model's thread",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.depth = Gauge(
            "bistack_queue_depth",
            "Requests waiting for a forward pass",
            multiprocess_mode="livesum",
            registry=self.registry,
        )
        load = Gauge(
            "bistack_model_load_seconds",
            "Seconds to open the model and run its first pass",
            multiprocess_mode="max",
            registry=self.registry,
        )
        load.set(load_seconds)

    def ran_pass(self, texts: int, seconds: float) -> None:
        self.pass_texts.observe(texts)
        self.pass_seconds.observe(seconds)

    def answered(self, route: str, method: str, status: int, seconds: float) -> None:
        labels = (route, method, str(status))
        self.requests.labels(*labels).inc()
        self.latency.labels(*labels).observe(seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format, as ``GET /metrics`` answers them."""
        if self.registry is not None:
            return generate_latest(self.registry)
        every_worker = CollectorRegistry()
        MultiProcessCollector(every_worker)
        return generate_latest(every_worker)


def log_access() -> None:
    """Write the access log (one JSON line per request) to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ACCESS_LOG.addHandler(handler)
    ACCESS_LOG.setLevel(logging.INFO)
    ACCESS_LOG.propagate = False


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's ``X-Request-ID`` when it is up to 128 visible ASCII characters, else a new
    one (32 hex digits)."""
    for name, value in headers:
        if name.lower() == b"x-request-id":
            if 0 < len(value) <= 128 and all(33 <= byte <= 126 for byte in value):
                return value.decode("ascii")
            break
    return uuid.uuid4().hex


CLIENT_CLOSED = 499  # nginx's status for a request whose client closed it before the answer


class Observed:
    """ASGI middleware around the whole app (size limits included): it gives each HTTP request
    an id, echoes it in ``X-Request-ID``, counts and times the answer in ``metrics``, and logs
    one JSON line: time, id, client, method, path, route, status, milliseconds and, for
    ``/predict``, the texts the request carried (the endpoint puts them in the scope's state)."""

    def __init__(self, app: Callable[..., Awaitable[None]], metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        ident = request_id(scope.get("headers", []))
        status = 500  # what the client gets when the app fails before it answers
        answered = gone = False

        async def send_with_id(message: dict[str, Any]) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status, answered = message["status"], True
                headers = [*message.get("headers", []), (b"x-request-id", ident.encode())]
                message = {**message, "headers": headers}
            await send(message)

        async def watched_receive() -> dict[str, Any]:
            nonlocal gone
            message = await receive()
            gone = gone or message["type"] == "http.disconnect"
            return message

        try:
            await self.app(scope, watched_receive, send_with_id)
        finally:
            if gone and not answered:  # the client left before its answer: not a server error
                status = CLIENT_CLOSED
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.answered(route, scope["method"], status, seconds)
            if ACCESS_LOG.isEnabledFor(logging.INFO):
                ACCESS_LOG.info(access_line(scope, ident, route, status, seconds))


def access_line(scope: dict[str, Any], ident: str, route: str, status: int, seconds: float) -> str:
    client = scope.get("client")
    line: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "id": ident,
        "client": f"{client[0]}:{client[1]}" if client else None,
        "method": scope["method"],
        "path": scope["path"],
        "route": route,
        "status": status,
        "ms": round(seconds * 1000, 3),
    }
    texts = scope.get("state", {}).get("texts")
    if texts is not None:
        line["texts"] = texts
    return json.dumps(line, ensure_ascii=False)
