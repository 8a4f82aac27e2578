"""bistack serve under load: throughput and latency with 1, 8 and 32 concurrent clients, beside
``bistack predict`` on the same texts, and with micro-batching off (``--max-batch 1``).

    .venv/bin/bistack train configs/conll03-bilstm-crf.yaml --set train.max_epochs=15 \\
        --output runs/conll03-confidence
    .venv/bin/python benchmarks/serve_load.py runs/conll03-confidence/model

The texts are CoNLL-2003 dev sentences as raw text, one per request. The load comes from wrk
(Debian's ``wrk`` package: a C load generator, so the clients take little of the CPU the server
needs); it shares this machine's cores with the server, so the figures are what one machine
serving itself gets, and the ratios against ``bistack predict`` are the point. Each load level
runs ``SECONDS``; the requests answered in it are counted. Writes
benchmarks/results/serve-load.{md,json}.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bistack.data.conll import read_conll
from bistack.tasks import load_model

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"
TEXTS = 800  # distinct texts, sent in turn
SECONDS = 15.0  # per load level
CLIENTS = (1, 8, 32)


def texts() -> list[str]:
    sentences = read_conll(DEV, 0, 3)
    return [" ".join(s.tokens) for s in sentences if len(s.tokens) > 2][:TEXTS]


def start_server(model_dir: str, max_batch: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "bistack.cli", "serve", model_dir, "--port", "0"]
    process = subprocess.Popen(
        [*command, "--max-batch", str(max_batch)], stdout=subprocess.PIPE, text=True
    )
    line = process.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    if not match:
        process.kill()
        raise SystemExit(f"the server did not start: {line}")
    return process, match.group(0)


LUA = """
local bodies = {%s}
local sent = 0
request = function()
  sent = sent %% #bodies + 1
  return wrk.format("POST", "/predict", {["Content-Type"] = "application/json"}, bodies[sent])
end
response = function(status, headers, body)
  if status ~= 200 then error("status " .. status .. ": " .. body) end
end
"""


def drive(address: str, corpus: list[str], clients: int) -> dict[str, float]:
    """``clients`` connections kept busy by wrk (one thread) for ``SECONDS``, one text per
    request, cycling through the texts; throughput and latency percentiles."""
    bodies = ",".join(
        "[==[" + json.dumps({"texts": [text]}, ensure_ascii=False) + "]==]" for text in corpus
    )
    httpx.post(f"{address}/predict", json={"texts": corpus[:1]}).raise_for_status()  # warm
    health = httpx.get(f"{address}/health").json()
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(LUA % bodies)
    command = ["wrk", "-t1", f"-c{clients}", f"-d{SECONDS:.0f}s", "--latency", "-s", script.name]
    output = subprocess.run([*command, address], capture_output=True, text=True, check=True).stdout
    Path(script.name).unlink()
    after = httpx.get(f"{address}/health").json()
    passes = after["batches"] - health["batches"]
    return {
        "clients": clients,
        "requests": after["texts"] - health["texts"],
        "texts_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50_ms": wrk_ms(output, "50%"),
        "p99_ms": wrk_ms(output, "99%"),
        "mean_texts_per_pass": (after["texts"] - health["texts"]) / max(passes, 1),
    }


def wrk_ms(output: str, percentile: str) -> float:
    """A latency percentile from wrk's ``--latency`` table, in milliseconds."""
    value, unit = re.search(rf"^\s+{percentile}\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def batch_prediction(model_dir: str, corpus: list[str]) -> dict[str, float]:
    """``bistack predict`` on the same texts: in this process (the model's own predict), and
    as the command (its start-up and model load included)."""
    model = load_model(model_dir)
    model.predict(corpus[:32])
    started = time.perf_counter()
    model.predict(corpus)
    in_process = len(corpus) / (time.perf_counter() - started)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as handle:
        handle.write("\n".join(corpus) + "\n")
    started = time.perf_counter()
    command_line = [sys.executable, "-m", "bistack.cli", "predict", model_dir]
    subprocess.run(
        [*command_line, "--input", handle.name, "--format", "jsonl"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    command = len(corpus) / (time.perf_counter() - started)
    Path(handle.name).unlink()
    return {"in_process_texts_per_s": in_process, "command_texts_per_s": command}


def main(model_dir: str) -> None:
    corpus = texts()
    baseline = batch_prediction(model_dir, corpus)
    rows = []
    for max_batch in (64, 1):
        process, address = start_server(model_dir, max_batch)
        try:
            levels = CLIENTS if max_batch > 1 else (32,)
            for clients in levels:
                row = drive(address, corpus, clients)
                row["max_batch"] = max_batch
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            process.terminate()
            process.wait()
    result = {"model": model_dir, "texts": len(corpus), "predict": baseline, "server": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "serve-load.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "serve-load.md").write_text(report(result))
    print(report(result))


def report(result: dict) -> str:
    base = result["predict"]["in_process_texts_per_s"]
    lines = [
        "# bistack serve under load",
        "",
        f"Model: `{result['model']}` (BiLSTM-CRF, CoNLL-2003; entity confidences computed for "
        f"every request, as `bistack predict` computes them). Texts: {result['texts']} CoNLL-2003 "
        "dev sentences as raw text, one per request, sent by wrk (one thread) on the same 2 "
        "cores as the server.",
        "",
        "Reproduce: `.venv/bin/python benchmarks/serve_load.py runs/conll03-confidence/model` "
        "(the model: `bistack train configs/conll03-bilstm-crf.yaml --set train.max_epochs=15 "
        "--output runs/conll03-confidence`).",
        "",
        "| setting | clients | requests | texts/s | vs `predict` | p50 ms | p99 ms "
        "| texts per pass |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["server"]:
        name = "micro-batching (64)" if row["max_batch"] > 1 else "no grouping (--max-batch 1)"
        lines.append(
            f"| {name} | {row['clients']} | {row['requests']} | {row['texts_per_s']:.0f} | "
            f"{row['texts_per_s'] / base:.2f}x | {row['p50_ms']:.1f} | {row['p99_ms']:.1f} | "
            f"{row['mean_texts_per_pass']:.1f} |"
        )
    predict = result["predict"]
    lines += [
        "",
        f"`bistack predict` on the same texts: {predict['in_process_texts_per_s']:.0f} texts/s "
        f"in process (`Tagger.predict`, batches of 256), {predict['command_texts_per_s']:.0f} "
        "texts/s as the command (start-up and model load included).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/conll03-confidence/model")
