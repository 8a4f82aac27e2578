"""What ``bistack serve`` is asked to do, as typed settings (no web framework imported): the
model, where to listen, the limits of a request, and how many processes serve it, here or on
Ray Serve. The spawned worker processes receive these settings whole."""

from __future__ import annotations

from dataclasses import dataclass, field

from bistack.errors import ConfigError
from bistack.models.precision import InferencePrecision

DEFAULT_MAX_WORKERS = 8  # each worker holds its own copy of the model


@dataclass(frozen=True)
class Limits:
    """What one request may carry, and how many texts a forward pass groups at most."""

    max_body_bytes: int = 1 << 20
    max_texts: int = 256
    max_chars: int = 20_000
    max_batch_texts: int = 64


@dataclass(frozen=True)
class ServeSettings:
    """model: the directory served (PyTorch or exported); host, port: where (port 0: any
    free one); workers: processes behind the one port, each with its own copy of the model and
    ``threads`` threads (None: :func:`default_workers`); ray: on Ray Serve instead, with
    ``replicas`` replicas of ``threads`` CPUs each; access_log: a JSON line per request on
    stderr; device, precision: where a PyTorch model runs and at what precision (each worker
    holds its own copy there)."""

    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    limits: Limits = field(default_factory=Limits)
    workers: int | None = None
    ray: bool = False
    replicas: int = 1
    threads: int = 1
    access_log: bool = True
    device: str = "cpu"
    precision: InferencePrecision | None = None  # None: as the model was trained

    def __post_init__(self) -> None:
        if self.ray and self.device != "cpu":
            raise ConfigError(
                "--device: Ray Serve's replicas are placed by Ray on CPUs here; serve on the "
                "device without --ray"
            )
        if self.ray and self.workers is not None and self.workers > 1:
            raise ConfigError("--workers is for serving here; on Ray Serve say --replicas")
        if self.replicas > 1 and not self.ray:
            raise ConfigError("--replicas is for Ray Serve (--ray); here say --workers")

    def processes(self, cpus: int) -> int:
        """The processes that serve: Ray's replicas, or the workers here (by default one per CPU,
        or one holding the model on a GPU)."""
        if self.ray:
            return self.replicas
        return self.workers or (1 if self.device != "cpu" else default_workers(self.ray, cpus))


def default_workers(ray: bool, cpus: int) -> int:
    """One worker per CPU, at most :data:`DEFAULT_MAX_WORKERS` (on Ray: this process alone,
    the replicas serve)."""
    return 1 if ray else min(cpus, DEFAULT_MAX_WORKERS)
