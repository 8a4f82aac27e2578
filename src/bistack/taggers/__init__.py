"""Taggers: a recurrent tagger and a tagger over a transformer's word states, with everything that
is theirs alone, by what it does: ``config`` (their config sections), ``recipe`` and
``layer_recipe`` (how each is trained), ``networks``, ``emissions`` (the output math of
emissions), ``models`` (what users load and get), ``ensembles`` (cross-validation and fold
ensembles) and ``exported`` (export plans, graphs and the runtime); ``cards`` says what each kind
offers."""
