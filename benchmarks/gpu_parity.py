"""On a CUDA machine: the GPU's own paths against the CPU's, on the same inputs.

- the CRF: the parallel scan on the GPU (log Z and its gradient, the best path) against the
  compiled CPU kernels, in float32, on CoNLL-sized batches (BIOES over 4 types: 17 tags);
- the recurrent encoder: the packed cuDNN path on the GPU against the CPU's per-direction path,
  every cell, stacked and residual, uni- and bidirectional, in values and gradients;
- whether any call warned that RNN weights were not in one contiguous chunk.

  python benchmarks/gpu_parity.py      prints one JSON line per check, and exits 1 on a mismatch
"""

from __future__ import annotations

import itertools
import json
import sys
import warnings

import torch

from bistack.crf import CRF
from bistack.encoders import RecurrentEncoder
from bistack.schemes import allowed_transitions

LABELS = ["O"] + [f"{p}-{t}" for t in ("PER", "LOC", "ORG", "MISC") for p in "BIES"]


def crf_check(device: torch.device) -> dict:
    torch.manual_seed(0)
    crf = CRF(len(LABELS), allowed_transitions("BIOES", LABELS), LABELS)
    emissions = torch.randn(64, 60, len(LABELS)) * 3
    lengths = torch.randint(1, 61, (64,))
    lengths[0] = 60
    mask = torch.arange(60) < lengths.unsqueeze(1)
    tags = crf.decode(emissions, mask).best  # a path the constraints allow
    results = {}
    for where in ("cpu", device):
        model = crf.to(where)
        model.zero_grad()
        inputs = emissions.to(where).clone().requires_grad_()
        loss = model.nll(inputs, tags.to(where), mask.to(where), reduction="sum")
        loss.backward()
        decoded = model.decode(inputs.detach(), mask.to(where))
        results[str(where)] = (
            loss.item(),
            inputs.grad.cpu().clone(),
            model.transitions.grad.cpu().clone(),
            decoded.best.cpu().clone(),
            decoded.scores.cpu().clone(),
        )
    cpu, gpu = results["cpu"], results[str(device)]
    return {
        "check": "crf scan on the GPU against the compiled CPU kernels",
        "nll_relative_difference": abs(cpu[0] - gpu[0]) / abs(cpu[0]),
        "emission_grad_max_difference": float((cpu[1] - gpu[1]).abs().max()),
        "transition_grad_max_difference": float((cpu[2] - gpu[2]).abs().max()),
        "paths_equal": bool(torch.equal(cpu[3], gpu[3])),
        "score_max_difference": float((cpu[4] - gpu[4]).abs().max()),
    }


def encoder_checks(device: torch.device) -> list[dict]:
    rows = []
    for cell, bidirectional, layers, residual in itertools.product(
        ("lstm", "gru"), (True, False), (1, 2), (False, True)
    ):
        torch.manual_seed(0)
        # Training mode (no dropout is set): cuDNN's RNN backward runs only in training mode.
        encoder = RecurrentEncoder(
            30, 40, cell=cell, bidirectional=bidirectional, num_layers=layers, residual=residual
        ).train()
        inputs = torch.randn(16, 25, 30)
        lengths = torch.randint(1, 26, (16,))
        outputs = {}
        for where in ("cpu", device):
            model = encoder.to(where)
            model.zero_grad()
            given = inputs.to(where).clone().requires_grad_()
            states = model(given, lengths=lengths.to(where)).states
            states.pow(2).sum().backward()
            grads = [p.grad.cpu().clone() for p in model.parameters()]
            outputs[str(where)] = (states.detach().cpu().clone(), given.grad.cpu().clone(), grads)
        cpu, gpu = outputs["cpu"], outputs[str(device)]
        rows.append(
            {
                "check": f"encoder {cell} {'bi' if bidirectional else 'uni'} {layers} layers"
                + (" residual" if residual else ""),
                "states_max_difference": float((cpu[0] - gpu[0]).abs().max()),
                "input_grad_max_difference": float((cpu[1] - gpu[1]).abs().max()),
                "weight_grad_max_difference": max(
                    float((a - b).abs().max()) for a, b in zip(cpu[2], gpu[2], strict=True)
                ),
            }
        )
    return rows


def main() -> int:
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # compare float32 with float32
    torch.backends.cudnn.allow_tf32 = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = [crf_check(device), *encoder_checks(device)]
    repacked = [str(w.message)[:120] for w in caught if "contiguous chunk" in str(w.message)]
    rows.append({"check": "cuDNN weight re-packing warnings", "count": len(repacked)})
    failed = False
    for row in rows:
        print(json.dumps(row), flush=True)
        differences = [v for k, v in row.items() if k.endswith("difference")]
        failed |= any(d > 1e-3 for d in differences) or row.get("paths_equal") is False
        failed |= row.get("count", 0) > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
