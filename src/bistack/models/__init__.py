"""Models composed from the building blocks; each rebuilds from its config."""
