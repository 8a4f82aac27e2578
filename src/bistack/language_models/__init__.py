"""The causal language model: its config, network, the model users load and sample from, and
its recipe (see ``cards``)."""
