"""The nothing-lost cases that race processes, signals and servers, run alone and then beside two
other torch processes (each a matrix product on one thread, for as long as the cases run): a
test that passes alone and fails under load waits for a fixed share instead of what it asserts.

    .venv/bin/python benchmarks/under_load.py   # writes benchmarks/results/under-load.md

Each group runs as one pytest process (one worker, one thread), alone, then under load; the
page says which passed, with the counts and times pytest printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GROUPS = {
    "two CVs at once, and a CV shared by --runs": [
        "tests/cv/test_cv_folder.py::test_a_second_cv_into_an_output_in_use_is_refused_naming_the_first",
        "tests/cv/test_cross_validation.py::test_processes_sharing_a_cv_with_runs_finish_the_one_a_process_alone_finishes",
        "tests/cv/test_cross_validation.py::test_a_cv_in_use_by_processes_sharing_it_is_never_swept_from_under_them",
    ],
    "a kill between the swap and the delete": [
        "tests/files/test_swap.py",
        "tests/cv/test_cv_folder.py::test_a_killed_overwrite_leaves_the_finished_cv_and_the_same_command_goes_on",
        "tests/runs/test_fault_injection.py::test_a_kill_during_the_swap_never_leaves_the_output_without_a_model",
    ],
    "serving a blend": ["tests/blends/test_blend.py::test_the_blend_serves_as_one_model"],
    "CV kills and resumes": [
        "tests/cv/test_cross_validation.py::test_a_killed_cv_resumes_without_retraining_finished_folds",
    ],
    "the serve cases": ["tests/serve/test_app.py"],
}
BURNER = (
    "import time, torch\n"
    "torch.set_num_threads(1)\n"
    "a = torch.randn(384, 384)\n"
    "end = time.monotonic() + {seconds}\n"
    "while time.monotonic() < end:\n"
    "    a = torch.tanh(a @ a)\n"
)


def run_group(tests: list[str]) -> tuple[bool, str, float]:
    """One pytest process over ``tests``: whether it passed, its summary line, its seconds."""
    started = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="bistack-under-load-")  # pytest's own: never shared
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "--basetemp", scratch, *tests],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ | {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )
    shutil.rmtree(scratch, ignore_errors=True)
    lines = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return (
        done.returncode == 0,
        (lines[-1] if lines else done.stdout[-300:]).strip("= "),
        (time.monotonic() - started),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/under-load.md"))
    parser.add_argument("--burners", type=int, default=2, help="torch processes beside")
    args = parser.parse_args()
    rows = []
    for name, tests in GROUPS.items():
        alone = run_group(tests)
        burners = [
            subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=3600)])
            for _ in range(args.burners)
        ]
        try:
            loaded = run_group(tests)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
        rows.append((name, alone, loaded))
        print(f"{name}: alone {alone[1]} ({alone[2]:.0f} s); under load {loaded[1]} "
              f"({loaded[2]:.0f} s)", flush=True)  # fmt: skip
    lines = [
        "# The racing cases, alone and under load",
        "",
        f"Written by `benchmarks/under_load.py` (`{args.burners}` torch processes beside, each "
        "a matrix product on one thread, on this machine's 2 CPUs). Each group is one pytest "
        "process, one worker, one thread.",
        "",
        "| group | alone | seconds | under load | seconds |",
        "|---|---|---|---|---|",
    ]
    for name, alone, loaded in rows:
        lines.append(
            f"| {name} | {'pass' if alone[0] else 'FAIL'}: {alone[1]} | {alone[2]:.0f} | "
            f"{'pass' if loaded[0] else 'FAIL'}: {loaded[1]} | {loaded[2]:.0f} |"
        )
    Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if not all(alone[0] and loaded[0] for _, alone, loaded in rows):
        sys.exit("a group failed: see " + args.output)


if __name__ == "__main__":
    main()
