"""How many threads a command's tensor library runs: chosen on purpose, and said when too many.

PyTorch starts one intra-op thread per physical core whatever else runs on the machine, so two
trainings on two cores, each with two threads, run 5-10x slower than one (threads spin waiting
for each other). bistack chooses: ``--threads`` when given, else ``OMP_NUM_THREADS`` when set,
else the CPUs this process may run on divided among the processes the command starts (``--devices
N`` on CPU starts N). The CLI applies the choice (it alone reads the environment); this module
only decides.
"""

from __future__ import annotations


def choose_threads(
    requested: int | None, environment: str | None, cpus: int, processes: int = 1
) -> int:
    """Threads per process: ``requested``, else ``OMP_NUM_THREADS`` (``environment``) when it
    is a positive integer, else ``cpus // processes`` (at least 1)."""
    if requested is not None:
        if requested < 1:
            raise ValueError(f"--threads must be >= 1, got {requested}")
        return requested
    if environment is not None and environment.strip().isdigit() and int(environment) > 0:
        return int(environment)
    return max(1, cpus // max(1, processes))


def oversubscription(threads: int, processes: int, cpus: int, others_running: int) -> str | None:
    """What to tell the user when this command's threads, with what else is running now,
    exceed the machine's CPUs; None when they fit."""
    ours = threads * processes
    if ours + others_running <= cpus:
        return None
    busy = f"{others_running} other running process{'es' if others_running != 1 else ''}, "
    return (
        f"{cpus} CPU{'s' if cpus != 1 else ''} for {busy if others_running else ''}"
        f"{ours} thread{'s' if ours != 1 else ''} of this run: threads that wait for a CPU "
        "slow every run on the machine several times over; give each run --threads so that "
        "together they fit (e.g. --threads 1 for two runs on two CPUs)"
    )
