"""Taggers: a recurrent tagger and a tagger over a transformer's word states, with everything that
is theirs alone: config sections, networks, the models users load, recipes, the output math of
emissions, export plans and graphs, and the exported runtime (see ``cards`` for what each kind
offers)."""
