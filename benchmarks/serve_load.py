"""bistack serve under load, beside in-process prediction of the same runtime on the same texts.

    .venv/bin/bistack train configs/conll03-bilstm-crf.yaml --set train.max_epochs=4 \\
        --output runs/benchmarks/serve-tagger
    .venv/bin/python benchmarks/serve_load.py runs/benchmarks/serve-tagger/model

The model is served as it is (PyTorch) and exported (``bistack export``, onnxruntime), each with
``--workers 1`` and ``--workers 2`` (one thread each, serve's default), to 1, 8 and 32 clients
sending one text per request, then 16. The texts are CoNLL-2003 dev sentences as raw text. The
load comes from wrk (Debian's ``wrk``: a C load generator, one thread, so the clients take little
of the CPU the server needs); it shares this machine's cores with the server, so the figures are
what one machine serving itself gets, and the ratios are the point. Each level runs ``SECONDS``.

Beside each server row, in this process and with the same runtime: the median time of one text
alone over the same texts (the floor of a lone client's latency), and again with the core left
idle for ``IDLE_GAP`` between texts, as a server's model thread is between one client's requests;
the throughput of ``predict`` at the batch size the server's passes reached (its 0.8x target)
and at batches of 256. From the server's ``/metrics``: the mean time of its forward passes in
the row, so a lone client's p50 splits into the model's time in the server and the rest (HTTP,
validation, the hand-over to the model's thread, JSON). Peak RSS of every server process is
read from /proc. Writes benchmarks/results/serve-load.{md,json}.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bistack.data.conll import read_conll
from bistack.predictor import open_model

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "conll2003" / "dev.txt"
RESULTS = ROOT / "benchmarks" / "results"
TEXTS = 800  # distinct texts, sent in turn
SECONDS = 10.0  # per load level
IDLE_GAP = 0.002  # seconds between texts: about a lone client's turn-around
CLIENTS = (1, 8, 32)
PER_REQUEST = (1, 16)
WORKERS = (1, 2)


def texts() -> list[str]:
    sentences = read_conll(DEV, 0, 3)
    return [" ".join(s.tokens) for s in sentences if len(s.tokens) > 2][:TEXTS]


def start_server(directory: str, workers: int) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "bistack", "serve", directory, "--port", "0"]
    command += ["--workers", str(workers), "--no-access-log"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    if not match:
        process.kill()
        raise SystemExit(f"the server did not start: {line}")
    address = match.group(0)
    ready = 0
    while ready < 10:  # fresh connections, so that every worker says it is warm
        try:
            ready = ready + 1 if httpx.get(f"{address}/ready").status_code == 200 else 0
        except httpx.TransportError:
            time.sleep(0.2)
    return process, address


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


def passes(address: str) -> tuple[float, float, float]:
    """Forward passes run, texts in them and their seconds so far, over all workers
    (``/metrics``)."""
    found = {}
    for family in text_string_to_metric_families(httpx.get(f"{address}/metrics").text):
        for sample in family.samples:
            found[sample.name] = sample.value
    names = ("bistack_pass_texts_count", "bistack_pass_texts_sum", "bistack_pass_seconds_sum")
    return tuple(found[name] for name in names)


def drive(address: str, corpus: list[str], clients: int, per_request: int) -> dict[str, float]:
    """``clients`` connections kept busy by wrk for ``SECONDS``, ``per_request`` texts per
    request, cycling through the texts; throughput and latency percentiles."""
    groups = [corpus[i : i + per_request] for i in range(0, len(corpus), per_request)]
    groups = [group for group in groups if len(group) == per_request]
    bodies = ",".join(
        "[==[" + json.dumps({"texts": group}, ensure_ascii=False) + "]==]" for group in groups
    )
    httpx.post(f"{address}/predict", json={"texts": groups[0]}).raise_for_status()
    count, total, seconds = passes(address)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(LUA % bodies)
    command = ["wrk", "-t1", f"-c{clients}", f"-d{SECONDS:.0f}s", "--latency", "-s", script.name]
    output = subprocess.run([*command, address], capture_output=True, text=True, check=True).stdout
    Path(script.name).unlink()
    after_count, after_total, after_seconds = passes(address)
    requests_per_s = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    return {
        "clients": clients,
        "texts_per_request": per_request,
        "texts": after_total - total,
        "texts_per_s": requests_per_s * per_request,
        "p50_ms": wrk_ms(output, "50%"),
        "p99_ms": wrk_ms(output, "99%"),
        "mean_texts_per_pass": (after_total - total) / max(after_count - count, 1),
        "mean_pass_ms": 1000 * (after_seconds - seconds) / max(after_count - count, 1),
    }


def wrk_ms(output: str, percentile: str) -> float:
    """A latency percentile from wrk's ``--latency`` table, in milliseconds."""
    value, unit = re.search(rf"^\s+{percentile}\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def peak_rss_mb(pid: int) -> list[float]:
    """Peak resident memory of the server process and each of its worker processes, in MB."""
    pids = [pid] + [
        int(path.parent.name)
        for path in Path("/proc").glob("[0-9]*/stat")
        if path.exists() and int(path.read_text().rsplit(")", 1)[1].split()[1]) == pid
    ]
    peaks = []
    for each in pids:
        status = Path(f"/proc/{each}/status").read_text()
        if "resource_tracker" in Path(f"/proc/{each}/cmdline").read_text():
            continue
        peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
    return peaks


class InProcess:
    """The runtime's own ``predict`` in this process, on the same texts."""

    def __init__(self, directory: str, corpus: list[str]) -> None:
        self.model = open_model(directory)
        self.corpus = corpus
        self.model.predict(corpus[:64])

    def single_ms(self, idle: float = 0.0) -> float:
        """Median time of one text alone, over the texts the server is sent, the core left
        idle for ``idle`` seconds before each."""
        times = []
        for text in self.corpus:
            if idle:
                time.sleep(idle)
            started = time.perf_counter()
            self.model.predict([text])
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    def texts_per_s(self, batch: int) -> float:
        """Throughput over the corpus in batches of ``batch`` texts (the best of two), measured
        anew beside each row: the shared cores' speed drifts within a run (one figure kept for
        the whole run once made the same batch size 847 and 1,733 texts/s in two runs)."""
        best = 0.0
        for _ in range(2):
            started = time.perf_counter()
            for start in range(0, len(self.corpus), batch):
                self.model.predict(self.corpus[start : start + batch])
            best = max(best, len(self.corpus) / (time.perf_counter() - started))
        return best


def exported(model_dir: str) -> str:
    output = ROOT / "runs" / "benchmarks" / "serve-load-onnx"
    command = [sys.executable, "-m", "bistack", "export", model_dir, "--output", str(output)]
    subprocess.run([*command, "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    return str(output)


def main(model_dir: str) -> None:
    corpus = texts()
    runtimes = {"PyTorch": model_dir, "exported": exported(model_dir)}
    rows = []
    for runtime, directory in runtimes.items():
        local = InProcess(directory, corpus)
        local.single_ms()  # every length seen once: the kernels the server has warm too
        for workers in WORKERS:
            process, address = start_server(directory, workers)
            try:
                for per_request in PER_REQUEST:
                    for clients in CLIENTS:
                        row = drive(address, corpus, clients, per_request)
                        if clients == 1 and per_request == 1:  # beside the lone client's row
                            singles = local.single_ms(), local.single_ms(IDLE_GAP)
                        batch = max(1, round(row["mean_texts_per_pass"]))
                        row |= {
                            "runtime": runtime,
                            "workers": workers,
                            "in_process_at_pass_size": local.texts_per_s(batch),
                            "in_process_at_256": local.texts_per_s(256),
                            "in_process_single_ms": singles[0],
                            "in_process_single_after_idle_ms": singles[1],
                        }
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                rss = peak_rss_mb(process.pid)
                for row in rows:
                    if row["runtime"] == runtime and row["workers"] == workers:
                        row["peak_rss_mb"] = rss
            finally:
                process.terminate()
                process.wait()
        del local
    result = {"model": model_dir, "texts": len(corpus), "seconds": SECONDS, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "serve-load.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "serve-load.md").write_text(report(result))
    print(report(result))


def report(result: dict) -> str:
    lines = [
        "# bistack serve under load",
        "",
        f"Model: `{result['model']}` (BiLSTM-CRF, CoNLL-2003; entity confidences computed for "
        "every request, as `bistack predict` computes them), served as it is (PyTorch) and "
        f"exported (onnxruntime). Texts: {result['texts']} CoNLL-2003 dev sentences as raw "
        f"text, sent by wrk (one thread) on the same 2 cores as the server, "
        f"{result['seconds']:.0f} s per row. Continuous batching, `--max-batch 64`.",
        "",
        f"Reproduce: `.venv/bin/python benchmarks/serve_load.py {result['model']}` (any "
        "CoNLL-2003 tagger directory of the shipped config: its speed does not depend on how "
        "long it trained; this one is `bistack train configs/conll03-bilstm-crf.yaml --set "
        "train.max_epochs=4 --output runs/benchmarks/serve-tagger`).",
        "",
        "Targets: one client's p50 within 1.5 ms of one text alone in process; 32 clients at "
        "0.8x or more of in-process `predict` at the batch size the server's passes reached. "
        "The in-process rows run in this process with every thread, beside each server row: "
        "the machine's speed changes from run to run (shared cores), so compare ratios, not "
        "texts/s across runs.",
        "",
        "| runtime | workers | texts/request | clients | texts/s | texts/pass | in-process "
        "at that size | ratio | ratio to batches of 256 | p50 ms | p99 ms | pass ms in the "
        "server | one text alone ms | the same after 2 ms idle | peak RSS MB (the server "
        "process; under --workers 2, then each worker) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["rows"]:
        rss = ", ".join(f"{value:.0f}" for value in row.get("peak_rss_mb", []))
        lines.append(
            f"| {row['runtime']} | {row['workers']} | {row['texts_per_request']} | "
            f"{row['clients']} | {row['texts_per_s']:.0f} | {row['mean_texts_per_pass']:.1f} | "
            f"{row['in_process_at_pass_size']:.0f} | "
            f"{row['texts_per_s'] / row['in_process_at_pass_size']:.2f}x | "
            f"{row['texts_per_s'] / row['in_process_at_256']:.2f}x | {row['p50_ms']:.2f} | "
            f"{row['p99_ms']:.2f} | {row['mean_pass_ms']:.2f} | "
            f"{row['in_process_single_ms']:.2f} | "
            f"{row['in_process_single_after_idle_ms']:.2f} | {rss} |"
        )
    lines += [
        "",
        "Where a lone client's time goes (one text per request): its p50 is the model's pass in "
        "the server plus the rest (HTTP, validation, the hand-over to the model's thread, JSON), "
        "and the pass in the server is compared with one text alone in this process, in a "
        "tight loop and after the core idled for 2 ms as the server's model thread does between "
        "one client's requests.",
        "",
        "| runtime | workers | p50 ms | pass in the server ms | the rest ms | alone, tight "
        "loop ms | alone, after 2 ms idle ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        if row["clients"] == 1 and row["texts_per_request"] == 1:
            lines.append(
                f"| {row['runtime']} | {row['workers']} | {row['p50_ms']:.2f} | "
                f"{row['mean_pass_ms']:.2f} | {row['p50_ms'] - row['mean_pass_ms']:.2f} | "
                f"{row['in_process_single_ms']:.2f} | "
                f"{row['in_process_single_after_idle_ms']:.2f} |"
            )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/benchmarks/serve-tagger/model")
