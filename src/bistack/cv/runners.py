"""Who trains a cross-validation's folds: one after another in this process, in a pool of
worker processes, or as Ray tasks; the same records either way (``workers`` and Ray are not
part of what a CV is)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Protocol

from bistack.cv.fold import FoldInputs, FoldJob, train_fold, train_fold_alone
from bistack.errors import ConfigError, needs_extra
from bistack.folds.contract import FoldResult, Predictions, Say
from bistack.folds.settings import RayCluster

Trained = Iterator[tuple[FoldJob, FoldResult[Predictions]]]


class FoldRunner(Protocol):
    """Trains ``jobs``, giving each job with its record, in the jobs' order, as each is
    known (``inputs``: what the folds share, where made already in this process)."""

    def run(self, jobs: list[FoldJob], say: Say, inputs: FoldInputs | None) -> Trained: ...


class InProcess:
    """One fold after another in this process, sharing ``inputs`` (made once)."""

    def run(self, jobs: list[FoldJob], say: Say, inputs: FoldInputs | None) -> Trained:
        for job in jobs:
            yield job, train_fold(job, say, inputs)


@dataclass(frozen=True)
class ProcessPool:
    """``workers`` spawned processes sharing this process's threads, each fold on a GPU of
    its own where there are several."""

    workers: int

    def run(self, jobs: list[FoldJob], say: Say, inputs: FoldInputs | None) -> Trained:
        import torch

        count = min(self.workers, len(jobs))
        jobs = [job.labelled() for job in jobs]  # folds print side by side: each line named
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus > 1:  # the folds dealt over the GPUs, one device each
            jobs = [job.on_device(index % gpus) for index, job in enumerate(jobs)]
        threads = max(1, torch.get_num_threads() // count)
        with ProcessPoolExecutor(
            count,
            mp_context=get_context("spawn"),
            initializer=torch.set_num_threads,
            initargs=(threads,),
        ) as pool:
            yield from zip(jobs, pool.map(train_fold, jobs), strict=True)


@dataclass(frozen=True)
class RayTasks:
    """Each fold a Ray task (this process's threads as its CPUs, a GPU when the cluster has
    them) on ``cluster`` (a Ray this process joined already: that one); every node must see
    the output folder."""

    cluster: RayCluster

    def run(self, jobs: list[FoldJob], say: Say, inputs: FoldInputs | None) -> Trained:
        try:
            import ray
        except ImportError as error:
            raise ConfigError(needs_extra("cv --ray", "ray", error)) from None
        import torch

        if not ray.is_initialized():  # with no address, Ray reads RAY_ADDRESS itself
            ray.init(
                self.cluster.address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        threads = torch.get_num_threads()
        jobs = [job.labelled() for job in jobs]  # folds print side by side: each line named
        gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(train_fold_alone)
        records = ray.get([task.remote(job, threads) for job in jobs])
        yield from zip(jobs, records, strict=True)


def runner_for(workers: int, ray: RayCluster | None, todo: int) -> FoldRunner:
    """The runner of ``todo`` folds: Ray tasks on ``ray``'s cluster, a pool of ``workers``
    processes where more than one fold is left to train, else this process."""
    if ray is not None:
        return RayTasks(ray)
    if workers > 1 and todo > 1:
        return ProcessPool(workers)
    return InProcess()
