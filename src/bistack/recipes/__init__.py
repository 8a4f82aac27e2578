"""Recipes: read a config, build, run, write a model directory and metrics."""
