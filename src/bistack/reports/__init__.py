"""``bistack evaluate MODEL DATA... --report DIR``: an evaluation a user can look at.

Each data file is one section: what the model's card says its report shows
(``Card.report``: plain data, computed by the kind's family), drawn here as PNG charts
(matplotlib) and one HTML page that works offline (no script, no CDN; every text escaped),
with ``report.json`` holding every figure. The directory is written whole beside ``DIR`` and
renamed into place, so a failed report leaves nothing half-written. ``info`` is what
``bistack info`` says of a model directory.
"""
