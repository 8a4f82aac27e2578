"""The inner loops of the building blocks, in the forms each device runs fastest: the CRF's
and the minimal recurrent cells' compiled CPU kernels (numba: ``crf_compiled``,
``min_cells_compiled``) and the CRF's parallel scan for GPUs and reduced precision
(``crf_scan``). ``bistack.crf`` and ``bistack.min_cells`` choose among them."""
