"""Data: readers, vocabularies, tokenisation and batching. No ``torch.nn`` here."""
