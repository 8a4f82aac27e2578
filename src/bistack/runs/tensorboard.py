"""A run's dev curve as a TensorBoard event file, when TensorBoard is installed.

Written synchronously, one append per epoch, by path: TensorBoard's own ``SummaryWriter``
appends from a thread of its own to a file it opened in the folder of the moment, so a run
whose staging folder becomes the output lost its writer (the next flush failed on a path that
was gone), and a full disk made that thread print a traceback of its own beside the run's
error. Here each epoch opens the file where the run's folder is now, appends its record
(TFRecord framing, ``tensorboard.summary.writer.record_writer``) and closes it; one file holds
the whole run.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

FOLDER = "tensorboard"


def installed() -> bool:
    """Whether TensorBoard's event format can be written here."""
    try:
        import tensorboard.compat.proto.event_pb2
        import tensorboard.summary.writer.record_writer  # noqa: F401
    except ImportError:
        return False
    return True


class ScalarEvents:
    """One run's event file: ``write(folder, scalars, step)`` appends a step's scalars to it in
    ``folder/tensorboard``, wherever the run's folder is at that moment."""

    def __init__(self) -> None:
        host = socket.gethostname()
        self.name = f"events.out.tfevents.{int(time.time())}.{host}.{os.getpid()}.bistack"

    def write(self, folder: Path, scalars: dict[str, float], step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.record_writer import RecordWriter

        path = folder / FOLDER / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        records = []
        if not path.exists():  # TensorBoard reads a file that starts by naming its version
            records.append(Event(wall_time=time.time(), file_version="brain.Event:2"))
        values = [Summary.Value(tag=key, simple_value=float(v)) for key, v in scalars.items()]
        records.append(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))
        with path.open("ab") as handle:
            writer = RecordWriter(handle)
            for record in records:
                writer.write(record.SerializeToString())
