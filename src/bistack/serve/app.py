"""The HTTP API and web page of ``bistack serve``.

FastAPI on uvicorn: FastAPI validates request bodies with pydantic models (which also give the
OpenAPI schema at ``/openapi.json`` and the docs at ``/docs``) and is the most used ASGI stack in
Python; Starlette alone would mean writing that validation and schema by hand. The docs' Swagger
UI comes from the ``fastapi-offline`` package, not from FastAPI's default CDN, so it works on a
machine without internet access, like the page (ReDoc is left out: it fetches its logo from its
CDN).

Endpoints: ``POST /predict`` ``{"texts": [...], options}`` -> ``{"predictions": [records]}``,
the records ``bistack predict --format jsonl`` writes; ``POST /sample`` for language models;
``GET /health`` (liveness), ``GET /ready`` (readiness: 503 until the model's thread has run its
first pass), ``GET /metrics`` (Prometheus), ``GET /info``; ``GET /`` the page. Bad input is a 4xx
with ``{"error": message}`` naming the problem, and never stops the server.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from typing import Annotated, Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictStr, create_model

from bistack.cards import PredictOption
from bistack.errors import BistackError
from bistack.inputs import unicode_problem
from bistack.serve.batcher import ContinuousBatcher
from bistack.serve.served import ServedModel
from bistack.serve.settings import Limits
from bistack.serve.telemetry import Metrics, Observed
from bistack.tasks import asked_options, kinds_offering, offered_options


def option_field(option: PredictOption, described: str) -> tuple[Any, Any]:
    """A request field for a declared option: its type strict (``true`` is not a number and
    ``"0.5"`` not a switch, as on the command line), its range, its help."""
    kind = cast(Any, Annotated)[option.kind, Strict()] | None  # a type made at run time
    above = (option.low, None) if option.low_open else (None, option.low)
    field = Field(option.default, gt=above[0], ge=above[1], le=option.high, description=described)
    return kind, field


def request_model() -> type[BaseModel]:
    """``PredictRequest``: the texts to predict, and a field for each option the registered
    kinds' cards declare (``bistack.tasks.offered_options``), with its range and help; which of
    them the served kind takes is checked by its card."""
    fields: dict[str, Any] = {
        "texts": (list[StrictStr], Field(description="the texts, one prediction each"))
    }
    for option in offered_options().values():
        if not option.carried_by("jsonl"):  # a table's column: no JSON record carries it
            continue
        kinds = ", ".join(card.kind for card in kinds_offering(option.name))
        fields[option.name] = option_field(option, f"{option.help} (kinds {kinds})")
    return create_model(
        "PredictRequest",
        __config__=ConfigDict(extra="forbid"),
        __doc__="Texts to predict, and the options ``bistack predict`` has (each model kind "
        "takes some).",
        **fields,
    )


def sample_request_model(options: Sequence[PredictOption]) -> type[BaseModel]:
    """``SampleRequest``: a prompt for a language model to continue, and a field for each
    option of its card's ``sample`` (what ``bistack sample``'s flags are built from too)."""
    fields: dict[str, Any] = {"prompt": (StrictStr, Field("", description="text to continue"))}
    for option in options:
        fields[option.name] = option_field(option, option.help)
    return create_model(
        "SampleRequest",
        __config__=ConfigDict(extra="forbid"),
        __doc__="A prompt for a language model to continue.",
        **fields,
    )


class PredictResponse(BaseModel):
    """One record per text, as ``bistack predict --format jsonl`` writes them (their fields
    depend on the model kind: entities and tokens, a label and probabilities, or values)."""

    predictions: list[dict[str, Any]]


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def create_app(
    served: ServedModel, limits: Limits | None = None, shared_metrics: bool = False
) -> FastAPI:
    """The app serving ``served``; its batcher starts with the app, and the app is ready once
    the model's thread has run the warm-up pass (requests that come first wait behind it).
    ``shared_metrics``: one of ``serve --workers``' processes, counting with the others."""
    limits = limits or Limits()
    metrics = Metrics(served.load_seconds, shared_metrics)
    batcher = ContinuousBatcher(
        served.predict, limits.max_batch_texts, metrics.ran_pass, metrics.depth.set
    )
    warmed = asyncio.Event()

    async def warm() -> None:
        await batcher.call(served.warm)
        warmed.set()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await batcher.start()
        warming = asyncio.create_task(warm())
        yield
        warming.cancel()
        await batcher.stop()

    app = FastAPIOffline(
        title=f"bistack: {served.description}",
        description="Predictions of a bistack model; the page at / tries it in a browser.",
        lifespan=lifespan,
        redoc_url=None,
        # The validator badge would fetch an image from swagger.io.
        swagger_ui_parameters={"validatorUrl": None},
    )
    app.state.batcher = batcher
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    app.add_middleware(Observed, metrics=metrics)  # outermost: refusals are counted too

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": validation_message(error)}, status_code=422)

    @app.exception_handler(BadRequest)
    async def bad(_: Request, error: BadRequest) -> JSONResponse:
        return JSONResponse({"error": error.message}, status_code=error.status)

    add_status_routes(app, served, limits, metrics, warmed)
    add_predict_route(app, served, limits)
    add_sample_route(app, served, limits)
    return app


def add_status_routes(
    app: FastAPI, served: ServedModel, limits: Limits, metrics: Metrics, warmed: asyncio.Event
) -> None:
    """The page at ``/`` and what says how the server is: ``/health``, ``/ready``,
    ``/metrics``, ``/info``."""
    batcher = app.state.batcher

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(resources.files("bistack.serve").joinpath("page.html").read_text())

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """Liveness: the server answers; the forward passes and texts its process has run, the
        texts in its pass now and those waiting for one (one of several under ``--workers``:
        ``worker`` is its process id)."""
        counts = {"batches": batcher.batches, "texts": batcher.texts}
        counts |= {"running": batcher.running, "waiting": batcher.depth}
        return {"status": "ok", "worker": os.getpid()} | counts

    @app.get("/ready", responses={503: {"description": "the model is still warming up"}})
    async def ready() -> JSONResponse:
        """Readiness: 200 once the model has run its warm-up pass on the thread that serves,
        503 before."""
        return JSONResponse({"ready": warmed.is_set()}, status_code=200 if warmed.is_set() else 503)

    @app.get("/metrics", response_class=Response)
    async def prometheus_metrics() -> Response:
        """Request counts and latencies by route and status, texts per forward pass, queue
        depth and model load time, in Prometheus's text format."""
        return Response(metrics.exposition(), media_type=metrics.content_type)

    @app.get("/info")
    async def info() -> dict[str, Any]:
        """The model's kind, labels, tagging scheme, training config summary, and what the
        page and ``/predict`` offer for it."""
        offers = {"view": served.view, "options": sorted(o.name for o in served.options)}
        limits_info = {"max_texts": limits.max_texts, "max_chars": limits.max_chars}
        return served.info | offers | {"limits": limits_info}


def add_predict_route(app: FastAPI, served: ServedModel, limits: Limits) -> None:
    """``POST /predict``, its request model built from the cards (listed in ``/docs`` where
    the served kind predicts)."""
    batcher = app.state.batcher

    async def predict(request: BaseModel, http: Request) -> Response:
        """One record per text: what ``bistack predict --format jsonl`` writes."""
        if served.samples:
            raise BadRequest(400, f"{served.description} predicts no labels; POST /sample")
        options = chosen_options(request, served)
        texts: list[str] = cast(Any, request).texts  # a field create_model made
        check_texts(texts, limits)
        http.state.texts = len(texts)  # for the access log
        try:
            records = await batcher.submit(list(texts), options)
        except (BistackError, ValueError) as error:
            raise BadRequest(422, str(error)) from None
        # Serialised here: FastAPI's generic encoder walks every nested value first, which cost
        # more than the forward pass for a tagger's records.
        body = json.dumps({"predictions": records}, ensure_ascii=False, allow_nan=False)
        return Response(body.encode(), media_type="application/json")

    # The request's model is built from the cards when the app is: FastAPI reads it from here.
    predict.__annotations__ |= {"request": request_model(), "http": Request, "return": Response}
    # /docs lists the routes the served kind answers: /predict, or /sample for a language model.
    app.post(
        "/predict",
        response_class=Response,
        responses={200: {"model": PredictResponse}},
        include_in_schema=not served.samples,
    )(predict)


def add_sample_route(app: FastAPI, served: ServedModel, limits: Limits) -> None:
    """``POST /sample`` (listed in ``/docs`` where the served kind samples)."""
    batcher = app.state.batcher

    async def sample(request: BaseModel) -> dict[str, Any]:
        """A continuation of the prompt (language models)."""
        if not served.samples:
            raise BadRequest(400, f"{served.description} does not sample text; POST /predict")
        options = request.model_dump()
        prompt = options.pop("prompt")
        if len(prompt) > limits.max_chars:
            raise BadRequest(422, f"prompt: longer than {limits.max_chars} characters")
        problem = unicode_problem(prompt)
        if problem is not None:
            raise BadRequest(422, f"prompt: {problem}")
        try:  # every option in its range before the sample is drawn
            served.checked_sample(options)
        except BistackError as error:
            raise BadRequest(422, str(error)) from None
        text = await batcher.call(lambda: served.sample(prompt, options))
        return {"prompt": prompt, "continuation": text}

    sample.__annotations__ |= {"request": sample_request_model(served.sample_options)}
    app.post("/sample", include_in_schema=served.samples)(sample)


def chosen_options(request: BaseModel, served: ServedModel) -> dict[str, Any]:
    """The options a request set, as ``predict`` keywords, checked by the served kind's card
    (one its model lacks is refused)."""
    asked = asked_options({name: value for name, value in request if name != "texts"})
    try:
        return served.checked_options(asked)
    except BistackError as error:
        raise BadRequest(400, str(error)) from None


def check_texts(texts: list[str], limits: Limits) -> None:
    if not texts:
        raise BadRequest(422, "texts: the list is empty; send at least one text")
    if len(texts) > limits.max_texts:
        raise BadRequest(
            413, f"texts: {len(texts)} texts, more than the {limits.max_texts} allowed per request"
        )
    for index, text in enumerate(texts):
        if not text.strip():
            raise BadRequest(422, f"texts[{index}]: the text is empty or only whitespace")
        problem = unicode_problem(text)
        if problem is not None:
            raise BadRequest(422, f"texts[{index}]: {problem}")
        if len(text) > limits.max_chars:
            raise BadRequest(
                413,
                f"texts[{index}]: {len(text)} characters, more than the {limits.max_chars} "
                "allowed per text",
            )


def validation_message(error: RequestValidationError) -> str:
    """pydantic's errors as one line a user can act on, e.g. ``texts: expected a list``."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body")
        kind = item.get("type", "")
        if kind == "json_invalid":
            parts.append("the body is not valid JSON")
        elif kind == "extra_forbidden":
            parts.append(f"{where}: unknown field")
        elif kind == "missing":
            parts.append(f"{where or 'body'}: required")
        elif kind in ("model_attributes_type", "dict_type"):
            parts.append('the body must be a JSON object such as {"texts": ["..."]}')
        else:
            parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, before the app reads it (whatever
    its Content-Length says: the body is counted as it arrives)."""

    def __init__(self, app: Callable[..., Awaitable[None]], limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await too_large(send, self.limit)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as error:
            where = f"byte {body[error.start]:#04x} at offset {error.start}"
            await refuse(send, 400, f"the body is not UTF-8 ({where}); send JSON in UTF-8")
            return
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def too_large(send: Any, limit: int) -> None:
    await refuse(send, 413, f"the body is larger than the {limit} bytes allowed")


async def refuse(send: Any, status: int, message: str) -> None:
    """Answer ``{"error": message}`` with ``status``, before the app reads the request."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
