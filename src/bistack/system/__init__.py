"""This machine and its processes: how many threads a command runs (``threads``), processes
that end with their parent (``processes``), and the environment a model process starts with
(``environment``)."""
