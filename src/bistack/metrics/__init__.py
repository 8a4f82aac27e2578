"""Metrics: pure functions over labels and predictions."""
