"""Cross-validation's plain parts, below every kind that is cross-validated: how rows are
dealt into folds (:mod:`~bistack.folds.splitters`), the plan of folds a CV writes to
``folds.json`` (:mod:`~bistack.folds.plan`), what ``bistack cv`` is asked to do and gives back
(:mod:`~bistack.folds.settings`), and what it asks of a kind's family, with the records they
exchange (:mod:`~bistack.folds.contract`). Nothing here imports torch; the run itself is
:mod:`bistack.cv`'s."""
