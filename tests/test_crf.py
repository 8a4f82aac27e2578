"""The CRF against brute-force enumeration and against pytorch-crf."""

import itertools
import weakref

import pytest
import torch
import torchcrf
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from bistack.crf import CRF, IMPOSSIBLE
from bistack.kernels.crf_scan import log_partition_scan, viterbi_scan
from bistack.schemes import allowed_transitions

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def make_crf(num_tags=4, allowed=None, seed=0):
    torch.manual_seed(seed)
    crf = CRF(num_tags, allowed)
    with torch.no_grad():
        for parameter in crf.parameters():
            parameter.normal_()
    return crf


def make_batch(batch_size=3, seq_len=4, num_tags=4, lengths=(4, 2, 1), seed=1):
    generator = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch_size, seq_len, num_tags, generator=generator)
    tags = torch.randint(num_tags, (batch_size, seq_len), generator=generator)
    mask = torch.arange(seq_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return emissions, tags, mask


def path_score(crf, emissions, path):
    transitions, start, end = crf.constrained_scores()
    score = start[path[0]] + end[path[-1]]
    score = score + sum(emissions[t, tag] for t, tag in enumerate(path))
    return score + sum(transitions[a, b] for a, b in itertools.pairwise(path))


def brute_force(crf, emissions, length):
    """Every tag sequence of ``length``: (log partition, best path, all scores sorted)."""
    paths = list(itertools.product(range(crf.num_tags), repeat=length))
    scores = torch.stack([path_score(crf, emissions[:length], p) for p in paths])
    order = scores.argsort(descending=True)
    return torch.logsumexp(scores, 0), [paths[i] for i in order], scores[order]


@pytest.mark.parametrize("constrained", [False, True])
def test_nll_equals_brute_force(constrained):
    allowed = allowed_transitions("BIO", LABELS) if constrained else None
    crf = make_crf(len(LABELS), allowed)
    emissions, tags, mask = make_batch(num_tags=len(LABELS))
    tags[0] = torch.tensor([1, 2, 0, 3])  # a path the scheme allows
    nll = crf.nll(emissions, tags, mask, reduction="none")
    for b, length in enumerate(mask.sum(1).tolist()):
        log_z, _, _ = brute_force(crf, emissions[b], length)
        gold = path_score(crf, emissions[b], tags[b, :length].tolist())
        torch.testing.assert_close(nll[b], log_z - gold)


def test_reductions():
    crf = make_crf()
    emissions, tags, mask = make_batch()
    per_sequence = crf.nll(emissions, tags, mask, reduction="none")
    torch.testing.assert_close(crf.nll(emissions, tags, mask, reduction="sum"), per_sequence.sum())
    torch.testing.assert_close(crf.nll(emissions, tags, mask), per_sequence.mean())
    torch.testing.assert_close(
        crf.nll(emissions, tags, mask, reduction="token_mean"), per_sequence.sum() / 7
    )
    assert torch.all(per_sequence > 0)


def test_padding_tags_are_ignored():
    crf = make_crf()
    emissions, tags, mask = make_batch()
    noisy = tags.masked_fill(~mask, -100)
    torch.testing.assert_close(crf.nll(emissions, tags, mask), crf.nll(emissions, noisy, mask))


@pytest.mark.parametrize("constrained", [False, True])
def test_decode_equals_brute_force_argmax_and_top_k(constrained):
    allowed = (
        allowed_transitions("BIOES", ["O", "B-X", "I-X", "E-X", "S-X"]) if constrained else None
    )
    crf = make_crf(5, allowed)
    emissions, _, mask = make_batch(seq_len=4, num_tags=5, lengths=(4, 3, 1))
    decoded = crf.decode(emissions, mask, top_k=3)
    assert decoded.tags.shape == (3, 3, 4)
    assert decoded.lengths.tolist() == [4, 3, 1]
    for b, length in enumerate(mask.sum(1).tolist()):
        _, paths, scores = brute_force(crf, emissions[b], length)
        for rank in range(3):
            assert decoded.to_lists(rank)[b] == list(paths[rank])
            torch.testing.assert_close(decoded.scores[b, rank], scores[rank])
    assert torch.equal(decoded.best, decoded.tags[:, 0])
    best = crf.decode(emissions, mask)  # top_k=1 takes its own fast path
    assert best.tags.shape == (3, 1, 4)
    assert torch.equal(best.tags[:, 0], decoded.tags[:, 0])
    torch.testing.assert_close(best.scores[:, 0], decoded.scores[:, 0])
    assert torch.all(decoded.tags[~mask.unsqueeze(1).expand_as(decoded.tags)] == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("ties", [False, True])
def test_compiled_cpu_decode_equals_the_scan_decode(dtype, ties):
    """The compiled kernel (CPU) and the parallel scan (GPU) find the same best paths; where
    several paths tie, each finds one of them, with the best score."""
    allowed = allowed_transitions("BIOES", ["O", "B-X", "I-X", "E-X", "S-X"])
    crf = make_crf(5, allowed)
    generator = torch.Generator().manual_seed(3)
    emissions = torch.randn(40, 30, 5, generator=generator, dtype=dtype)
    if ties:  # integer scores everywhere: many equal paths
        emissions = emissions.round()
        with torch.no_grad():
            for parameter in crf.parameters():
                parameter.copy_(parameter.round())
    lengths = torch.randint(1, 31, (40,), generator=generator)
    lengths[:2] = torch.tensor([1, 30])
    mask = torch.arange(30) < lengths.unsqueeze(1)
    transitions, start, end = (score.to(dtype) for score in crf.constrained_scores())
    compiled = crf.decode(emissions, mask)
    tags, best = viterbi_scan(emissions, mask, transitions, start, end)
    torch.testing.assert_close(compiled.scores[:, 0], best)
    assert compiled.scores.dtype == best.dtype == dtype
    assert torch.all(tags[~mask] == 0)
    if not ties:
        assert torch.equal(compiled.tags[:, 0], tags)
    for b, length in enumerate(lengths.tolist()):  # the scan's path scores what it says
        path = tags[b, :length].tolist()
        scored = path_score(crf, emissions[b].float(), path)
        torch.testing.assert_close(scored.to(dtype), best[b], atol=1e-4, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_cpu_log_partition_equals_the_scan_in_value_and_gradient(dtype):
    crf = make_crf(5, allowed_transitions("BIOES", ["O", "B-X", "I-X", "E-X", "S-X"]))
    generator = torch.Generator().manual_seed(4)
    emissions = torch.randn(30, 25, 5, generator=generator, dtype=dtype)
    lengths = torch.randint(1, 26, (30,), generator=generator)
    lengths[:2] = torch.tensor([1, 25])
    mask = torch.arange(25) < lengths.unsqueeze(1)
    upstream = torch.randn(30, generator=generator, dtype=dtype)

    def value_and_grads(log_partition):
        crf.zero_grad()
        inputs = emissions.clone().requires_grad_()
        transitions, start, end = (score.to(dtype) for score in crf.constrained_scores())
        log_z = log_partition(inputs, mask, transitions, start, end)
        (log_z * upstream).sum().backward()
        return log_z, [inputs.grad] + [p.grad.clone() for p in crf.parameters()]

    compiled, compiled_grads = value_and_grads(crf._log_partition)
    reference, reference_grads = value_and_grads(log_partition_scan)
    assert compiled.dtype == dtype
    tolerance = 1e-4 if dtype == torch.float32 else 1e-9
    torch.testing.assert_close(compiled, reference, atol=tolerance, rtol=0)
    for ours, theirs in zip(compiled_grads, reference_grads, strict=True):
        torch.testing.assert_close(ours, theirs, atol=tolerance, rtol=0)


def test_compiled_log_partition_falls_back_to_log_space_when_scaled_sums_underflow():
    # BIOES: B-X must be followed by I-X or E-X. Position 0 all but forces B-X; position 1 puts
    # both successors 1000 nats below O, so every scaled probability at position 1 is exactly 0.
    crf = make_crf(5, allowed_transitions("BIOES", ["O", "B-X", "I-X", "E-X", "S-X"]))
    emissions = torch.zeros(2, 3, 5, dtype=torch.float64)
    emissions[:, 0, 1] = 1000.0
    emissions[:, 1, 2:4] = -1000.0
    mask = torch.tensor([[True, True, True], [True, True, False]])

    def value_and_grad(log_partition):
        inputs = emissions.clone().requires_grad_()
        log_z = log_partition(inputs, mask, *(x.double() for x in crf.constrained_scores()))
        log_z.sum().backward()
        return log_z, inputs.grad

    compiled, compiled_grad = value_and_grad(crf._log_partition)
    reference, reference_grad = value_and_grad(log_partition_scan)
    assert torch.isfinite(compiled).all()
    torch.testing.assert_close(compiled, reference)
    torch.testing.assert_close(compiled_grad, reference_grad)
    for b, length in enumerate(mask.sum(1).tolist()):
        log_z, _, _ = brute_force(crf, emissions[b].float(), length)
        torch.testing.assert_close(compiled[b].float(), log_z, atol=1e-3, rtol=0)


def test_constrained_decode_never_emits_a_forbidden_transition():
    allowed = allowed_transitions("BIO", LABELS)
    crf = make_crf(len(LABELS), allowed)
    # Emissions that love I- tags: unconstrained decoding would open entities with I-.
    emissions = torch.randn(64, 12, len(LABELS))
    emissions[:, :, [2, 4]] += 3.0
    decoded = crf.decode(emissions)
    ok = torch.tensor(allowed.transitions)
    for path in decoded.to_lists():
        assert allowed.start[path[0]]
        assert all(ok[a, b] for a, b in itertools.pairwise(path))


def test_constraints_are_buffers_not_parameters():
    crf = CRF(len(LABELS), allowed_transitions("BIO", LABELS))
    saved = set(crf.state_dict()) - {name for name, _ in crf.named_parameters()}
    assert saved == {"transitions_ok", "start_ok", "end_ok"}
    assert {name for name, _ in crf.named_parameters()} == {
        "transitions",
        "start_transitions",
        "end_transitions",
    }


def test_loaded_constraints_are_the_ones_its_scores_forbid():
    """The forbidden moves are made once, not every step: loading another CRF's constraints
    makes them again."""
    constrained = CRF(len(LABELS), allowed_transitions("BIO", LABELS))
    free = CRF(len(LABELS))
    free.load_state_dict(constrained.state_dict())
    for loaded, made in zip(
        free.constrained_scores(), constrained.constrained_scores(), strict=True
    ):
        torch.testing.assert_close(loaded, made, atol=0, rtol=0)
    assert (free.constrained_scores()[0] == IMPOSSIBLE).any()


@pytest.mark.parametrize("seed", range(5))
def test_unconstrained_nll_agrees_with_pytorch_crf(seed):
    num_tags = 7
    ours = make_crf(num_tags, seed=seed)
    theirs = torchcrf.CRF(num_tags, batch_first=True)
    theirs.transitions.data.copy_(ours.transitions.data)
    theirs.start_transitions.data.copy_(ours.start_transitions.data)
    theirs.end_transitions.data.copy_(ours.end_transitions.data)
    emissions, tags, mask = make_batch(5, 11, num_tags, (11, 3, 7, 1, 10), seed=seed)
    expected = -theirs(emissions, tags, mask, reduction="none")
    torch.testing.assert_close(ours.nll(emissions, tags, mask, "none"), expected, atol=1e-5, rtol=0)
    assert ours.decode(emissions, mask).to_lists() == theirs.decode(emissions, mask)


def test_gradients_reach_every_parameter():
    crf = make_crf(len(LABELS), allowed_transitions("IOB1", LABELS))
    emissions, tags, mask = make_batch(num_tags=len(LABELS))
    tags.fill_(0)
    emissions.requires_grad_(True)
    crf.nll(emissions, tags, mask).backward()
    for name, parameter in crf.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name
    assert emissions.grad is not None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c, e, t, m: c.nll(e[0], t, m),
            "emissions must be 3-D (batch_size, seq_len, num_tags), got shape (4, 4)",
        ),
        (
            lambda c, e, t, m: c.nll(e[..., :3], t, m),
            "expected last dimension of emissions is 4, got 3",
        ),
        (
            lambda c, e, t, m: c.nll(e, t[:, :2], m),
            "tags shape (3, 2) does not match emissions (3, 4)",
        ),
        (lambda c, e, t, m: c.nll(e, t + 4, m), "tags must be in [0, 4) at real positions"),
        (
            lambda c, e, t, m: c.nll(e, t, m.long()),
            "mask must be a bool tensor (True = real token), got torch.int64",
        ),
        (
            lambda c, e, t, m: c.nll(e, t, m, "avg"),
            "invalid reduction: 'avg' (expected 'mean', 'sum', 'none' or 'token_mean')",
        ),
        (lambda c, e, t, m: c.decode(e, m, top_k=0), "top_k must be >= 1, got 0"),
        (
            lambda c, e, t, m: c.decode(e, m.flip(1)),
            "mask must be right-padded (real tokens first); row 1 is not",
        ),
    ],
)
def test_bad_input_raises_exact_messages(call, message):
    crf = make_crf()
    emissions, tags, mask = make_batch()
    with pytest.raises(ValueError) as error:
        call(crf, emissions, tags, mask)
    assert str(error.value) == message


def test_invalid_number_of_tags():
    with pytest.raises(ValueError) as error:
        CRF(0)
    assert str(error.value) == "invalid number of tags: 0"


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        (["I-PER", "O"], "starts with I-PER"),  # IOB1 opens entities with I-
        (["O", "I-PER", "O"], "moves O -> I-PER at position 1"),
        (["B-PER", "I-LOC"], "moves B-PER -> I-LOC at position 1"),
    ],
)
def test_a_gold_path_the_constraints_forbid_is_an_error_not_a_huge_loss(tags, message):
    # Tags in the wrong scheme would score IMPOSSIBLE: a loss of ~1e4 per move that trains
    # nothing. The CRF names the sequence and the move instead.
    crf = CRF(len(LABELS), allowed_transitions("BIO", LABELS), names=LABELS)
    good = [LABELS.index(t) for t in ["B-PER", "I-PER", "O"]]
    bad = [LABELS.index(t) for t in tags] + [0] * (3 - len(tags))
    gold = torch.tensor([good, bad])
    mask = torch.tensor([[True] * 3, [True] * len(tags) + [False] * (3 - len(tags))])
    with pytest.raises(ValueError, match=f"sequence 1 .*{message}"):
        crf.nll(torch.randn(2, 3, len(LABELS)), gold, mask)
    assert torch.isfinite(crf.nll(torch.randn(1, 3, len(LABELS)), gold[:1]))


def test_a_forbidden_end_is_an_error():
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    crf = CRF(len(labels), allowed_transitions("BIOES", labels), names=labels)
    with pytest.raises(ValueError, match="ends with I-PER"):
        crf.nll(torch.randn(1, 2, len(labels)), torch.tensor([[1, 2]]))


@pytest.mark.parametrize("constrained", [False, True])
def test_the_scan_equals_brute_force_in_float64(constrained):
    """The GPU's path, forced on the CPU: log Z, its gradient (the tag marginals) and the best
    path against enumeration of every path, in float64."""
    labels = ["O", "B-X", "I-X", "E-X", "S-X"]
    allowed = allowed_transitions("BIOES", labels) if constrained else None
    crf = make_crf(5, allowed).double()
    emissions, _, mask = make_batch(batch_size=4, seq_len=5, num_tags=5, lengths=(5, 3, 1, 4))
    emissions = emissions.double().requires_grad_()
    scores = crf.constrained_scores()
    log_z = log_partition_scan(emissions, mask, *scores)
    log_z.sum().backward()
    tags, best = viterbi_scan(emissions.detach(), mask, *scores)
    for b, length in enumerate(mask.sum(1).tolist()):
        expected, paths, ranked = brute_force(crf, emissions[b].detach(), length)
        torch.testing.assert_close(log_z[b], expected, atol=1e-9, rtol=0)
        assert tags[b, :length].tolist() == list(paths[0])
        torch.testing.assert_close(best[b], ranked[0], atol=1e-9, rtol=0)
        # d log Z / d emissions[t, k] = P(tag t is k): the marginals from enumeration
        probabilities = torch.softmax(torch.stack([path_score(crf, emissions[b].detach(), p)
                                                   for p in paths]), 0)  # fmt: skip
        for t in range(length):
            for k in range(5):
                marginal = sum(q for q, p in zip(probabilities, paths, strict=True) if p[t] == k)
                torch.testing.assert_close(emissions.grad[b, t, k], marginal, atol=1e-9, rtol=0)
    assert torch.all(emissions.grad[~mask] == 0)


def operators_run(call) -> int:
    """How many operators (a GPU kernel launch each, at least) ``call`` runs, as the profiler
    counts them on the CPU."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiled:
        call()
    return sum(1 for event in profiled.events() if event.name.startswith("aten::"))


def test_the_scan_runs_a_number_of_operators_that_grows_with_log_length_not_length():
    crf = make_crf(9)

    def training_step(seq_len):
        emissions = torch.randn(8, seq_len, 9, dtype=torch.float64, requires_grad=True)
        mask = torch.ones(8, seq_len, dtype=torch.bool)
        scores = [s.double() for s in crf.constrained_scores()]
        return lambda: log_partition_scan(emissions, mask, *scores).sum().backward()

    short, long = operators_run(training_step(16)), operators_run(training_step(256))
    # 4 levels against 8: the operators grow by about twice the first's levels, not 16-fold
    assert long < 2.5 * short, (short, long)
    scores = crf.constrained_scores()
    decode = [
        operators_run(lambda n=n: viterbi_scan(*make_batch(8, n, 9, [n] * 8)[::2], *scores))
        for n in (16, 256)
    ]
    assert decode[1] < 2.5 * decode[0], decode


def test_until_a_device_run_fills_the_choice_table_a_device_runs_the_scan():
    from bistack.kernels import crf_choice

    assert crf_choice.table()["winners"] == {"train": {}, "decode": {}}
    assert not any(crf_choice.takes_loop(stage, 3) for stage in ("train", "decode"))


@pytest.mark.parametrize("stage", ["train", "decode"])
def test_where_the_table_picks_the_loop_a_device_gets_the_scans_answers(stage, monkeypatch):
    """A filled table sends a CRF of few enough tags to the loop over positions on a device
    (the CPU's compiled kernels kept out): the same loss, gradients and best paths."""
    from bistack import crf as crf_module
    from bistack.kernels import crf_choice

    crf = make_crf(5, allowed_transitions("BIO", ["O", "B-X", "I-X", "B-Y", "I-Y"]))
    emissions, _, mask = make_batch(4, 6, 5, lengths=(6, 3, 1, 5))
    tags = torch.tensor([[0, 1, 2, 0, 3, 4]] * 4)
    monkeypatch.setattr(crf_module, "runs_compiled", lambda _: False)
    taken: list[str] = []
    for name in ("log_partition_loop", "log_partition_scan", "viterbi_scan"):
        real = getattr(crf_module, name)
        monkeypatch.setattr(crf_module, name, lambda *a, n=name, f=real: taken.append(n) or f(*a))
    real_loop = crf_module.CRF._viterbi
    monkeypatch.setattr(
        crf_module.CRF, "_viterbi", lambda *a: taken.append("viterbi loop") or real_loop(*a)
    )

    def answers() -> tuple:
        if stage == "decode":
            decoded = crf.decode(emissions, mask)
            return decoded.tags, decoded.scores
        leaf = emissions.clone().requires_grad_(True)
        loss = crf.nll(leaf, tags, mask)
        loss.backward()
        return loss.detach(), leaf.grad

    scanned = answers()
    filled = {"measured_on": "a test", "batch": 4, "winners": {stage: {"5": "loop"}}}
    monkeypatch.setattr(crf_choice, "table", lambda: filled)
    looped = answers()
    for scan, loop in zip(scanned, looped, strict=True):
        torch.testing.assert_close(loop, scan, atol=1e-5, rtol=0)
    expected = {"train": ["log_partition_scan", "log_partition_loop"],
                "decode": ["viterbi_scan", "viterbi loop"]}  # fmt: skip
    assert taken == expected[stage]
    filled["winners"][stage] = {"3": "loop", "5": "scan", "9": "loop"}  # the scan won at 5
    assert not crf_choice.takes_loop(stage, crf.num_tags)
    assert crf_choice.takes_loop(stage, 4) and crf_choice.takes_loop(stage, 12)


class _WholeLogProduct(torch.autograd.Function):
    """The scan's log-semiring product as it was before blocking: each chunk's triples formed
    whole as temporaries, going forward and back (the reference the blocked one is held to)."""

    @staticmethod
    def forward(ctx, left, right):
        out = torch.logsumexp(left.unsqueeze(-1) + right.unsqueeze(-3), dim=-2)
        ctx.save_for_backward(left, right, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        left, right, out = ctx.saved_tensors
        total = torch.where(torch.isfinite(out), out, 0.0)
        share = torch.exp(left.unsqueeze(-1) + right.unsqueeze(-3) - total.unsqueeze(-2))
        weighted = share * grad.unsqueeze(-2)
        return weighted.sum(-1), weighted.sum(-3)


def whole_max_product(left, right):
    """The max-plus product as it was before blocking: each product's triples formed whole."""
    return (left.unsqueeze(-1) + right.unsqueeze(-3)).max(dim=-2).values


def bytes_allocated(call) -> int:
    """The bytes ``call``'s operators allocate, as the CPU profiler counts them (each
    allocation where it is made, none taken back for what is freed)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiled:
        call()
    return sum(max(event.self_cpu_memory_usage, 0) for event in profiled.events())


def test_at_73_tags_the_blocked_scan_allocates_at_most_a_quarter_of_the_whole_products_bytes(
    monkeypatch,
):
    """OntoNotes' 73 BIOES tags: a training step's scan and a decoded batch's, the same answers
    as with each product's triples formed whole, a quarter of the bytes allocated at most."""
    from bistack.kernels import crf_scan

    torch.manual_seed(0)
    emissions, mask = torch.randn(16, 12, 73), torch.ones(16, 12, dtype=torch.bool)
    mask[1, 9:] = False
    scores = torch.randn(73, 73), torch.randn(73), torch.randn(73)

    def train():
        leaf = emissions.clone().requires_grad_(True)
        log_partition_scan(leaf, mask, *scores).sum().backward()
        return leaf.grad

    def decode():
        return viterbi_scan(emissions, mask, *scores)[0]

    blocked = {call: (call(), bytes_allocated(call)) for call in (train, decode)}
    with monkeypatch.context() as whole:
        whole.setattr(crf_scan, "_workspace", lambda matrices: matrices.new_empty(0))
        whole.setattr(crf_scan, "_log_matmul", lambda a, b, _: _WholeLogProduct.apply(a, b))
        whole.setattr(crf_scan, "_max_matmul", lambda a, b, _: whole_max_product(a, b))
        formed = {call: (call(), bytes_allocated(call)) for call in (train, decode)}
    for call in (train, decode):
        torch.testing.assert_close(blocked[call][0], formed[call][0], atol=1e-5, rtol=0)
        share = blocked[call][1] / formed[call][1]
        assert share <= 0.25, f"{call.__name__}: {share:.2f} of the whole products' bytes"


def test_the_nll_of_bf16_emissions_is_the_float32_nll_of_the_same_values():
    """Under bf16 autocast the CRF reads bf16 emissions; its loss is computed in float32, so it
    is the float32 loss of those (rounded) values, per sequence (in bf16 a log Z in the
    hundreds keeps 8 bits: off by nats)."""
    torch.manual_seed(0)
    crf = CRF(7)
    emissions = (torch.randn(6, 60, 7) * 4).bfloat16()
    tags = torch.randint(0, 7, (6, 60))
    mask = torch.arange(60).expand(6, 60) < torch.tensor([[60], [55], [40], [30], [12], [3]])
    low = crf.nll(emissions, tags, mask, reduction="none")
    full = crf.nll(emissions.float(), tags, mask, reduction="none")
    assert low.dtype == torch.float32
    assert torch.allclose(low, full, atol=1e-3, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_scan_equals_the_cpu_kernels_when_the_constraints_forbid_every_path(dtype):
    """A user's constraint set may forbid every path (every move, start and end): each path then
    scores thousands below zero, and a padding position that let the scan change tag at the
    cost of one forbidden move would count paths the CPU kernels, which stop at each length,
    never see."""
    from bistack.kernels.crf_compiled import IMPOSSIBLE, log_partition, viterbi_best

    num_tags = 3
    generator = torch.Generator().manual_seed(5)
    emissions = torch.randn(6, 7, num_tags, generator=generator, dtype=dtype)
    lengths = torch.tensor([7, 5, 3, 2, 1, 6])
    mask = torch.arange(7) < lengths.unsqueeze(1)
    transitions = torch.full((num_tags, num_tags), IMPOSSIBLE, dtype=dtype)
    start = torch.full((num_tags,), IMPOSSIBLE, dtype=dtype)
    end = torch.full((num_tags,), IMPOSSIBLE, dtype=dtype)
    arrays = [t.numpy() for t in (emissions, transitions, start, end)]
    expected_log_z, _, _ = log_partition(arrays[0], lengths.numpy(), *arrays[1:])
    expected_tags, expected_best = viterbi_best(arrays[0], lengths.numpy(), *arrays[1:])
    log_z = log_partition_scan(emissions, mask, transitions, start, end)
    tags, best = viterbi_scan(emissions, mask, transitions, start, end)
    torch.testing.assert_close(log_z, torch.as_tensor(expected_log_z, dtype=dtype))
    torch.testing.assert_close(best, torch.as_tensor(expected_best, dtype=dtype))
    for b, length in enumerate(lengths.tolist()):
        assert tags[b, :length].tolist() == expected_tags[b, :length].tolist()


class LiveBytes(TorchDispatchMode):
    """The peak of the bytes held by the tensors every operator made, while they live: memory
    counted on meta tensors, which hold no data (a GPU's peak, without a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.holders: dict[int, int] = {}  # a storage's tensors alive

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                key, size = storage._cdata, storage.nbytes()
                if key not in self.holders:
                    self.live += size
                    self.peak = max(self.peak, self.live)
                self.holders[key] = self.holders.get(key, 0) + 1
                weakref.finalize(tensor, self.released, key, size)
        return out

    def released(self, key: int, size: int) -> None:
        self.holders[key] -= 1
        if not self.holders[key]:
            del self.holders[key]
            self.live -= size


def test_the_scan_of_a_large_tag_set_fits_a_stated_memory_budget():
    """OntoNotes' 73 BIOES tags at batch 256, 48 positions, in float64 as device decoding runs
    it: the best paths, log Z and its gradient (the marginals) within 4 GB, counted (formed
    whole, one level's from-middle-to triples alone took about 20 GB, and autograd kept them)."""
    batch, length, tags = 256, 48, 73
    options = {"device": "meta", "dtype": torch.float64}
    emissions = torch.randn(batch, length, tags, **options)
    mask = torch.ones(batch, length, dtype=torch.bool, device="meta")
    moves = [torch.randn(tags, tags, **options), *(torch.randn(tags, **options) for _ in "se")]
    with LiveBytes() as counted, torch.enable_grad():
        viterbi_scan(emissions, mask, *moves)
        leaf = emissions.clone().requires_grad_(True)
        log_z = log_partition_scan(leaf, mask, *moves)
        torch.autograd.grad(log_z.sum(), leaf)
    assert counted.peak < 4e9
