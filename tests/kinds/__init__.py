"""Model kinds defined outside bistack, each in a folder of its own, registered with one call."""
