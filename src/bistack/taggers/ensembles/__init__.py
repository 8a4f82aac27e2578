"""A tagger under cross-validation: how its sentences are split into folds and scored out of
fold, and the fold ensemble that averages its members' token marginals."""
