"""``bistack serve`` on Ray Serve: past one machine, on a cluster a user already runs.

Every replica opens the model itself and runs the very app ``bistack serve`` runs (the same
request and response bodies, the page, the continuous batcher, the metrics of that replica);
Ray's HTTP proxy spreads requests over the replicas. Two ways in:

    bistack serve runs/conll03/model --ray --replicas 2     # a local Ray, or RAY_ADDRESS's cluster
    serve run bistack.serve.ray:build model=/shared/conll03/model replicas=8 threads=2

The second is Ray's own command on the application builder ``build`` (``serve deploy`` takes it
too, as ``import_path: bistack.serve.ray:build`` with ``args``). On a cluster the model directory
must be readable at the same path on every node that runs a replica (a shared filesystem), since
each replica opens it where it runs. Each replica asks Ray for ``threads`` CPUs and runs that many
torch threads, in bistack's process environment (offline, the bounded oneDNN cache).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from bistack.errors import ConfigError
from bistack.serve.app import create_app
from bistack.serve.served import load_served
from bistack.serve.settings import Limits
from bistack.system.environment import MODEL_PROCESS_ENVIRONMENT

# Requests a replica holds at once. Ray's default (5) would cap a pass at 5 requests; the
# batcher queues the rest itself, so a replica takes many and batches what it has.
MAX_ONGOING = 256


class Replica:
    """One Ray Serve replica: the model opened where the replica runs, and the app over it."""

    def __init__(self, model: str, threads: int, limits: dict[str, Any]) -> None:
        self.served = load_served(model, threads)  # an export's onnxruntime takes the threads
        self.limits = Limits(**limits)

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.served, self.limits)


def deployment(
    model: str | Path, replicas: int = 1, threads: int = 1, limits: Limits | None = None
) -> Any:
    """The Ray Serve application serving ``model`` from ``replicas`` replicas (``serve.run``
    it, with ``route_prefix="/"``)."""
    from ray import serve

    limits = limits or Limits()
    environment = MODEL_PROCESS_ENVIRONMENT | {"OMP_NUM_THREADS": str(threads)}

    ingress = serve.ingress()(Replica)
    server = serve.deployment(
        ingress,
        name="bistack",
        num_replicas=replicas,
        max_ongoing_requests=MAX_ONGOING,
        # A replica's process starts with bistack's environment and its torch threads set,
        # on whichever node of the cluster it lands.
        ray_actor_options={"num_cpus": threads, "runtime_env": {"env_vars": environment}},
    )
    # serve.deployment called with options returns a Deployment; its stub says a decorator
    return server.bind(  # type: ignore[attr-defined]
        str(Path(model).resolve()), threads, asdict(limits)
    )


def build(args: dict[str, str]) -> Any:
    """Ray's application builder: ``serve run bistack.serve.ray:build model=DIR [replicas=N]
    [threads=T] [max_batch=N]``."""
    known = {"model", "replicas", "threads", "max_batch"}
    unknown = sorted(set(args) - known)
    if unknown or "model" not in args:
        raise ConfigError(
            f"bistack.serve.ray:build takes model=DIR and optionally replicas=N, threads=N, "
            f"max_batch=N; got {', '.join(f'{k}=' for k in sorted(args)) or 'nothing'}"
        )
    try:
        numbers = {
            key: int(args.get(key, default))
            for key, default in (("replicas", 1), ("threads", 1), ("max_batch", 64))
        }
    except ValueError as error:
        raise ConfigError(f"bistack.serve.ray:build: {error}; expected a whole number") from None
    limits = Limits(max_batch_texts=numbers["max_batch"])
    return deployment(args["model"], numbers["replicas"], numbers["threads"], limits)
