"""bistack: bidirectional and stacked recurrent models for NLP."""

__version__ = "0.1.0"
