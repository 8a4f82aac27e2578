"""The recurrent cells an encoder is built from, by name, declared once and torch-free: the
config schema checks a name against them, ``bistack.encoders`` builds them (torch's own
LSTM and GRU, or the parallel-scan cells of ``bistack.min_cells``)."""

from __future__ import annotations

from typing import Literal, get_args

TorchCellName = Literal["lstm", "gru"]  # torch's cells (cuDNN on a GPU, oneDNN on the CPU)
MinCellName = Literal["mingru", "minlstm"]  # minimal cells computed by a parallel scan
CellName = Literal[TorchCellName, MinCellName]
TORCH_CELLS: tuple[str, ...] = get_args(TorchCellName)
MIN_CELLS: tuple[str, ...] = get_args(MinCellName)
CELLS: tuple[str, ...] = get_args(CellName)
