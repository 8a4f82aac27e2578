def test_a_collapsed_temperature_is_not_kept_and_the_run_says_so():
    """One wrong answer among many sure right ones on a small dev set pulls the fitted
    temperature towards 0 (every probability 1.0, unseen text too): not kept."""
    import numpy as np

    from bistack.data.tables import Example
    from bistack.text_models.outputs import ClassOutputs, RawOutputs

    outputs = ClassOutputs({"labels": ["neg", "pos"]})
    logits = np.array([[-0.2, 0.2]] * 19 + [[0.01, -0.01]], dtype=np.float32)
    examples = [Example("t", ("pos",), row) for row in range(19)] + [Example("t", ("neg",), 20)]
    raw = RawOutputs([[] for _ in examples], logits, None, 0.0)
    said = outputs.fit_on_dev(examples, "dev.tsv", raw, False)
    assert "below 0.05" in said and "probabilities kept as trained" in said
    assert "temperature" not in outputs.info
