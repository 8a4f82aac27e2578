"""How many threads a command's tensor library runs: chosen on purpose, and said when too many.

PyTorch starts one intra-op thread per physical core whatever else runs on the machine, so two
trainings on two cores, each with two threads, run 5-10x slower than one (threads spin waiting
for each other). bistack chooses: ``--threads`` when given, else ``OMP_NUM_THREADS`` when set,
else the CPUs this process may run on divided among the processes the command starts (``--devices
N`` on CPU starts N). The CLI applies the choice (it alone reads the environment); this module
only decides.
"""

from __future__ import annotations

import os
from pathlib import Path

PF_KTHREAD = 0x00200000  # a task's flags (the 9th field of /proc/PID/stat): a kernel thread


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
    busy = (
        f"{others_running} running thread{'s' if others_running != 1 else ''} of other programs, "
    )
    return (
        f"{cpus} CPU{'s' if cpus != 1 else ''} for {busy if others_running else ''}"
        f"{ours} thread{'s' if ours != 1 else ''} of this run: threads that wait for a CPU "
        "slow every run on the machine several times over; give each run --threads so that "
        "together they fit (e.g. --threads 1 for two runs on two CPUs)"
    )


def gpu_present(devices: Path = Path("/dev")) -> bool:
    """Whether an NVIDIA GPU's device files are here (what ``--accelerator auto`` would take),
    said without starting torch: the thread count is chosen before it starts."""
    return any(devices.glob("nvidia[0-9]*"))


def threads_running_elsewhere(root: Path = Path("/proc")) -> int:
    """Threads of other programs on a CPU right now (Linux's ``/proc``; 0 elsewhere): every
    task in the running state but this process's own and the kernel's own threads, which
    /proc/loadavg counts too."""
    own = str(os.getpid())
    count = 0
    try:
        processes = [e for e in os.scandir(root) if e.name.isdigit() and e.name != own]
    except OSError:
        return 0
    for process in processes:
        try:
            tasks = list(os.scandir(Path(process.path) / "task"))
        except OSError:  # ended meanwhile, or not ours to read
            continue
        for task in tasks:
            try:
                stat = (Path(task.path) / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()  # after the command's name
            if len(fields) > 6 and fields[0] == "R" and not int(fields[6]) & PF_KTHREAD:
                count += 1
    return count
