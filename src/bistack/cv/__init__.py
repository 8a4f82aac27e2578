"""Cross-validation, the room of ``bistack cv``: the run (:mod:`~bistack.cv.run`), its
settings and scores (:mod:`~bistack.cv.settings`), the plan of folds
(:mod:`~bistack.cv.plan`) and the splitters that deal it (:mod:`~bistack.cv.splitters`), what a
kind's family answers (:mod:`~bistack.cv.family`), one fold's training
(:mod:`~bistack.cv.fold`) and who trains the folds (:mod:`~bistack.cv.runners`), the pooled
out-of-fold predictions and the fold ensemble (:mod:`~bistack.cv.finish`), and the output
folder's layout (:mod:`~bistack.cv.folder`). ``compare-poolers --folds`` deals its folds with
the same plan. The ensemble directory's format is :mod:`bistack.files.ensemble_dir`'s: every
outlet reads it, below the kinds that open it."""
