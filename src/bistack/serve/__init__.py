"""``bistack serve``: a model behind HTTP, with a web page (needs the serve extra)."""
