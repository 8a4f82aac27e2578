"""The text family's cards: recurrent classifiers and regressors, and classifiers and
regressors over a transformer's layers (plain data, no torch; see ``bistack.cards``)."""

from __future__ import annotations

from bistack.cards import CSV, JSONL, TSV, Card, CrossValidating, Exporting, Ladder, PredictOption
from bistack.metrics.dev import Metric
from bistack.text_models.formats import PROBABILITIES

DEV_ACCURACY = Metric("dev_accuracy", "dev accuracy", higher_is_better=True)
DEV_RMSE = Metric("dev_rmse", "dev RMSE", higher_is_better=False)
LADDER = Ladder(
    {"encoder.bidirectional": False, "encoder.num_layers": 1, "encoder.residual": False}
    | {"pooling.type": "last"},
    "3. + attention pooling",
    {"pooling.type": "additive"},
)
HERE = "bistack.text_models"
ENSEMBLE, BLEND = f"{HERE}.ensemble:TextEnsemble", f"{HERE}.blending:TextBlendPart"
CROSS_VALIDATING = CrossValidating(f"{HERE}.folds:FAMILY", ENSEMBLE, blend=BLEND)
LAYER_CROSS_VALIDATING = CrossValidating(f"{HERE}.folds:LAYER_FAMILY", ENSEMBLE, blend=BLEND)
ATTENTION = PredictOption(
    "attention", bool, "include each token's attention weight", default=False, formats=("jsonl",)
)
FORMATS = (JSONL, CSV, TSV)  # JSON lines first: a text model's default

CLASSIFIER = Card(
    "classifier",
    "a recurrent text classifier",
    config=f"{HERE}.config:ClassifierConfig",
    recipe=f"{HERE}.recipe:prepare_classifier",
    loader=f"{HERE}.text:Classifier",
    metric=DEV_ACCURACY,
    takes_tables=True,
    formats=FORMATS,
    predict_options=(ATTENTION, PROBABILITIES),
    ladder=LADDER,
    exporting=Exporting(f"{HERE}.export:text_plan", f"{HERE}.runtime:ExportedClassifier"),
    report=f"{HERE}.report:classifier_report",
    view="classes",
    cross_validating=CROSS_VALIDATING,
)
REGRESSOR = Card(
    "regressor",
    "a recurrent text regressor",
    config=f"{HERE}.config:RegressorConfig",
    recipe=f"{HERE}.recipe:prepare_regressor",
    loader=f"{HERE}.text:Regressor",
    metric=DEV_RMSE,
    takes_tables=True,
    formats=FORMATS,
    predict_options=(ATTENTION,),
    ladder=LADDER,
    exporting=Exporting(f"{HERE}.export:text_plan", f"{HERE}.runtime:ExportedRegressor"),
    report=f"{HERE}.report:regressor_report",
    view="values",
    cross_validating=CROSS_VALIDATING,
)
LAYER_CLASSIFIER = Card(
    "layer_classifier",
    "a classifier over a transformer's layers",
    config=f"{HERE}.config:LayerClassifierConfig",
    recipe=f"{HERE}.layer_recipe:prepare_layer_classifier",
    loader=f"{HERE}.layer_text:LayerPoolingClassifier",
    metric=DEV_ACCURACY,
    takes_tables=True,
    compares_poolers=True,
    formats=FORMATS,
    predict_options=(PROBABILITIES,),
    exporting=Exporting(
        f"{HERE}.export:layer_text_plan",
        f"{HERE}.runtime:ExportedLayerClassifier",
        shared=f"{HERE}.export:shared_backbone_plans",
    ),
    report=f"{HERE}.report:classifier_report",
    view="classes",
    cross_validating=LAYER_CROSS_VALIDATING,
)
LAYER_REGRESSOR = Card(
    "layer_regressor",
    "a regressor over a transformer's layers",
    config=f"{HERE}.config:LayerRegressorConfig",
    recipe=f"{HERE}.layer_recipe:prepare_layer_regressor",
    loader=f"{HERE}.layer_text:LayerPoolingRegressor",
    metric=DEV_RMSE,
    takes_tables=True,
    compares_poolers=True,
    formats=FORMATS,
    exporting=Exporting(
        f"{HERE}.export:layer_text_plan",
        f"{HERE}.runtime:ExportedLayerRegressor",
        shared=f"{HERE}.export:shared_backbone_plans",
    ),
    report=f"{HERE}.report:regressor_report",
    view="values",
    cross_validating=LAYER_CROSS_VALIDATING,
)
CARDS = (CLASSIFIER, REGRESSOR, LAYER_CLASSIFIER, LAYER_REGRESSOR)
