"""Cross-validation, the room of ``bistack cv``: the run (:mod:`~bistack.cv.run`), which family
cross-validates a kind (:mod:`~bistack.cv.family`), one fold's training
(:mod:`~bistack.cv.fold`) and who trains the folds (:mod:`~bistack.cv.runners`), the pooled
out-of-fold predictions and the fold ensemble (:mod:`~bistack.cv.finish`), the output folder's
layout (:mod:`~bistack.cv.folder`) and a finished one read back (:mod:`~bistack.cv.reader`:
what ``bistack blend`` and ``compare-poolers`` read). The splitters, the plan of folds, the
settings and what a family answers lie a floor below, in :mod:`bistack.folds`, where the
families import them. The ensemble directory's format is :mod:`bistack.files.ensemble_dir`'s:
every outlet reads it, below the kinds that open it."""
