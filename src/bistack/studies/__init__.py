"""Studies that use the task table: the build-order ladder (``ladder``), pooler comparisons
(``compare_poolers``, ``pooler_variants``), repeated runs and their table against the seed
noise (``repeated``, ``seed_table``), the hyperparameter search (``tune``, ``search_space``,
``tune_results``), the demo (``demo``) and attention explanations (``explain``).
Cross-validation is not a study (it writes a model every outlet opens): it lives in
:mod:`bistack.cv`."""
