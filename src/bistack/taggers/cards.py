"""The tagging family's cards: a recurrent tagger and a tagger over a transformer's word
states (plain data, no torch; see ``bistack.cards``)."""

from __future__ import annotations

from typing import Any

from bistack.cards import Card, CrossValidating, Exporting, Ladder, PredictOption
from bistack.inputs import TEXT, TOKENS
from bistack.metrics.dev import Metric
from bistack.taggers.models.formats import FORMATS

DEV_F1 = Metric("dev_f1", "dev F1", higher_is_better=True)
DEV_TAG_ACCURACY = Metric("dev_token_accuracy", "dev accuracy", higher_is_better=True)
OPTIONS = (
    PredictOption(
        "min_confidence",
        float,
        "leave out entities whose probability is below P (their tokens tagged O)",
        low=0.0,
        high=1.0,
        metavar="P",
    ),
    PredictOption(
        "top_k",
        int,
        "also the K best analyses of each sentence, with their probabilities",
        default=1,
        low=1,
        high=20,
        metavar="K",
        formats=("jsonl",),  # the other formats have one analysis a sentence
    ),
)


def tagging_metric(config: Any) -> Metric:
    """Entity F1, or per-token accuracy for plain tags (``data.scheme: none``)."""
    return DEV_TAG_ACCURACY if config.data.scheme == "none" else DEV_F1


def with_transformer(settings: dict[str, Any], backbone: str) -> dict[str, Any]:
    """A recurrent tagger's settings as a tagger over a transformer's word states (frozen,
    first subword, mixed over layers) that stacks the recurrent tagger's features beside them."""
    kept = ("data", "features", "encoder", "head", "optimizer", "train")
    return {"kind": "layer_tagger", "backbone": {"path": backbone}} | {
        key: settings[key] for key in kept
    }


ENSEMBLE, BLEND = (
    "bistack.taggers.ensembles.ensemble:TaggerEnsemble",
    "bistack.taggers.ensembles.blending:TaggerBlendPart",
)
FOLDS = "bistack.taggers.ensembles.folds"
TAGGER = Card(
    "tagger",
    "a recurrent sequence tagger",
    config="bistack.taggers.config:TaggerConfig",
    recipe="bistack.taggers.recipe:prepare_tagger",
    loader="bistack.taggers.models.tagger:Tagger",
    metric=DEV_F1,
    metric_of=tagging_metric,
    inputs=(TEXT, TOKENS),
    formats=FORMATS,
    predict_options=OPTIONS,
    view="entities",
    streams=True,
    ladder=Ladder(
        {"encoder.bidirectional": False, "encoder.num_layers": 1, "encoder.residual": False}
        | {"head.type": "softmax"},
        "3. + CRF",
        {"head.type": "crf"},
        with_transformer=with_transformer,
    ),
    exporting=Exporting(
        "bistack.taggers.exported.export:tagger_plan",
        "bistack.taggers.exported.runtime:ExportedTagger",
    ),
    report="bistack.taggers.models.report:tagger_report",
    cross_validating=CrossValidating(f"{FOLDS}:FAMILY", ENSEMBLE, blend=BLEND),
)
LAYER_TAGGER = Card(
    "layer_tagger",
    "a tagger over a transformer's layers",
    config="bistack.taggers.config:LayerPoolingTaggerConfig",
    recipe="bistack.taggers.layer_recipe:prepare_layer_tagger",
    loader="bistack.taggers.models.layer_tagger:LayerPoolingTagger",
    metric=DEV_F1,
    metric_of=tagging_metric,
    inputs=(TEXT, TOKENS),
    formats=FORMATS,
    predict_options=OPTIONS,
    view="entities",
    exporting=Exporting(
        "bistack.taggers.exported.export:layer_tagger_plan",
        "bistack.taggers.exported.runtime:ExportedLayerTagger",
        shared="bistack.taggers.exported.export:shared_backbone_plans",
    ),
    report="bistack.taggers.models.report:tagger_report",
    cross_validating=CrossValidating(f"{FOLDS}:LAYER_FAMILY", ENSEMBLE, blend=BLEND),
)
CARDS = (TAGGER, LAYER_TAGGER)
