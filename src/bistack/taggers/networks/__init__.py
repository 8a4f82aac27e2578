"""A tagger's networks in PyTorch: the recurrent tagger, the tagger over a transformer's word
states, their softmax or CRF heads, and the streaming tagger that emits each tag as its token
arrives."""
