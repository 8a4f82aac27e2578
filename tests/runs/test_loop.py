def test_an_optimizer_that_cannot_be_fused_steps_all_parameters_at_once():
    """Where a loss scaler must unscale before clipping (float16 mixed precision), Adam is not
    fused, and then foreach, never the per-parameter loop torch would otherwise choose."""
    from torch import nn

    from bistack.config import OptimizerConfig
    from bistack.runs.optimizers import build_optimizer

    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    for name in ("adam", "adamw"):
        options = OptimizerConfig(name=name)
        unfused = build_optimizer(options, model, fused=False)
        assert unfused.defaults["foreach"] is True and not unfused.defaults["fused"]
        assert build_optimizer(options, model).defaults["fused"] is True
