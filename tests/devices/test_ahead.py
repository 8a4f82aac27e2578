"""Items made ahead in a background thread come as the caller would have made them: in order,
an error where its item would have been, in the caller's context, and a caller that stops
early stops the thread and lets the source clean up."""

import contextvars
import threading

import pytest
import torch

from bistack.devices.ahead import ahead
from bistack.models.spelling_cache import each_batch_alone, spelling_cache_on


def test_items_come_in_order_and_an_error_where_its_item_was():
    def items():
        yield from range(5)
        raise ValueError("the sixth item is bad")

    seen = []
    with pytest.raises(ValueError, match="sixth"):
        for item in ahead(items(), depth=2):
            seen.append(item)
    assert seen == [0, 1, 2, 3, 4]


def test_a_caller_that_stops_early_stops_the_thread_and_the_source_cleans_up():
    cleaned = threading.Event()
    made = []

    def items():
        try:
            for number in range(1000):
                made.append(number)
                yield number
        finally:
            cleaned.set()

    running = ahead(items(), depth=1)
    assert [next(running), next(running)] == [0, 1]
    running.close()
    assert cleaned.is_set()  # closed by the time close returns: the thread was joined
    assert len(made) <= 4  # no more than the depth made past what was read
    assert not [t for t in threading.enumerate() if t.name == "bistack-ahead"]


def test_items_are_made_in_the_callers_context_and_gradient_mode():
    flag = contextvars.ContextVar("flag", default="unset")

    def items():
        for _ in range(2):
            yield (
                flag.get(),
                spelling_cache_on(),
                torch.is_grad_enabled(),
                threading.current_thread(),
            )

    flag.set("set")
    with each_batch_alone(), torch.no_grad():
        made = list(ahead(items()))
    assert all(item[:3] == ("set", False, False) for item in made)
    assert made[0][3] is not threading.current_thread()


def test_a_pass_made_ahead_runs_at_the_callers_mixed_precision():
    """``predict --precision bf16-mixed``: a network pass made in the background thread is as
    mixed as the caller's (autocast is each thread's own), and in float32 where it is not."""
    layer = torch.nn.Linear(4, 3)

    def passes():
        for _ in range(2):
            yield layer(torch.ones(2, 4)).dtype

    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer(torch.ones(2, 4)).dtype == torch.bfloat16  # as the caller computes
        assert list(ahead(passes())) == [torch.bfloat16] * 2
    with torch.inference_mode():
        assert list(ahead(passes())) == [torch.float32] * 2


def test_a_depth_below_one_is_refused():
    with pytest.raises(ValueError, match="depth"):
        next(ahead([1], depth=0))


def test_overlapped_prediction_gives_what_one_batch_at_a_time_gives(
    small_tagger, small_classifier, monkeypatch
):
    """On a GPU the next batch runs ahead in a thread; forced so here, the predictions (tags
    and confidences, labels and probabilities) are the same as on the CPU's one path."""
    from bistack.devices import ahead as module
    from bistack.predictor import open_model
    from tests.conftest import tiny_sentences

    texts = [" ".join(t for t, _ in s) for s in tiny_sentences(40, seed=5)]
    started = []
    real_ahead, on_the_host = module.ahead, module.beside_the_host
    monkeypatch.setattr(module, "ahead", lambda *a, **k: started.append(1) or real_ahead(*a, **k))
    for folder in (small_tagger, small_classifier):
        model = open_model(folder).model
        alone = [p.to_json() for p in model.predict(texts, batch_size=8)]
        assert not started  # on a CPU: no thread
        monkeypatch.setattr(module, "beside_the_host", lambda device: True)
        together = [p.to_json() for p in model.predict(texts, batch_size=8)]
        monkeypatch.setattr(module, "beside_the_host", on_the_host)
        assert started and together == alone
        started.clear()


def test_an_overlapped_epoch_trains_the_same_weights(tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from bistack import tasks
    from bistack.devices import ahead as module
    from tests.conftest import tiny_config, tiny_sentences, train_quietly, write_conll

    train = write_conll(tmp_path / "train.txt", tiny_sentences(60, seed=0))
    dev = write_conll(tmp_path / "dev.txt", tiny_sentences(20, seed=1))
    config = tasks.config_from_dict(tiny_config(train, dev))
    alone = load_file(train_quietly(config, tmp_path / "alone") / "model.safetensors")
    monkeypatch.setattr(module, "beside_the_host", lambda device: True)
    together = load_file(train_quietly(config, tmp_path / "together") / "model.safetensors")
    assert alone.keys() == together.keys()
    assert all(torch.equal(alone[name], together[name]) for name in alone)


@pytest.mark.parametrize("kind", ["tagger", "classifier"])
def test_a_single_batch_starts_no_thread(kind, small_tagger, small_classifier, monkeypatch):
    """On an accelerator the next batch is made ahead in a thread; a call of one batch (a
    one-sentence prediction) has nothing to overlap with and starts none."""
    from bistack.devices import ahead as module
    from bistack.predictor import load_model

    started = []
    original = module.ahead

    def counted(items, depth=1):
        started.append(depth)
        return original(items, depth)

    monkeypatch.setattr(module, "beside_the_host", lambda device: True)  # as on a GPU
    monkeypatch.setattr(module, "ahead", counted)
    model = load_model(small_tagger if kind == "tagger" else small_classifier)
    model.predict(["Mary left Rome ."])
    assert started == []
    model.predict(["Mary left Rome ."] * 3, batch_size=2)
    assert len(started) == 1
