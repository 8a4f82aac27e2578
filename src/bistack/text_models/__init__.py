"""Text classifiers and regressors, recurrent or over a transformer's layers, with everything
that is theirs alone: config sections, networks, the models users load, recipes, the output
math of scores, export plans and graphs, and the exported runtime (see ``cards``)."""
