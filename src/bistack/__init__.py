"""bistack: bidirectional and stacked recurrent models for NLP."""
