"""``bistack blend``: several cross-validated runs of one table and one split as one model, the
runs weighted on their honest out-of-fold predictions (:mod:`bistack.blends.run`), the weights
found by :mod:`bistack.folds.weights`, the runs read and checked by :mod:`bistack.blends.runs`."""
