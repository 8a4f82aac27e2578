"""A run's dev curve as a TensorBoard event file, when TensorBoard is installed.

Written synchronously, one append per epoch, by path: TensorBoard's own ``SummaryWriter``
appends from a thread of its own to a file it opened in the folder of the moment, so a run
whose staging folder becomes the output lost its writer (the next flush failed on a path that
was gone), and a full disk made that thread print a traceback of its own beside the run's
error. Here each epoch opens the file where the run's folder is now, appends its records and
closes it; one file holds the whole run. The records are TFRecord-framed (a length and the data,
each with a masked CRC-32C) by the few lines below: TensorBoard's own framing module imports
its TensorFlow stand-in, half a second of every training command's start.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

from bistack.files.leftovers import leftover_name

FOLDER = "tensorboard"


def installed() -> bool:
    """Whether TensorBoard's event format can be written here (its protocol buffers)."""
    try:
        import tensorboard.compat.proto.event_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1  # Castagnoli, reflected
        table.append(crc)
    return table


CRC32C_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: CRC-32C of ``data``, rotated right by 15 bits plus a constant."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """``data`` framed as one TFRecord: its length, the length's checksum, the data, the data's
    checksum."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


class ScalarEvents:
    """One run's event file: ``write(folder, scalars, step)`` appends a step's scalars to it in
    ``folder/tensorboard``, wherever the run's folder is at that moment."""

    def __init__(self) -> None:
        host = socket.gethostname()
        self.name = f"events.out.tfevents.{int(time.time())}.{host}.{os.getpid()}.bistack"

    def write(self, folder: Path, scalars: dict[str, float], step: int) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        path = folder / FOLDER / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        records = []
        if not path.exists():  # TensorBoard reads a file that starts by naming its version
            records.append(Event(wall_time=time.time(), file_version="brain.Event:2"))
        values = [Summary.Value(tag=key, simple_value=float(v)) for key, v in scalars.items()]
        records.append(Event(wall_time=time.time(), step=step, summary=Summary(value=values)))
        with path.open("ab") as handle:
            handle.write(b"".join(tfrecord(record.SerializeToString()) for record in records))


def keep_until(folder: Path, step: int) -> None:
    """Drop the records after ``step`` from every event file in ``folder/tensorboard`` (a
    resumed run writes those steps again, into a file of its own: TensorBoard would show them
    twice). Each file is rewritten whole beside itself, then renamed over it."""
    from tensorboard.compat.proto.event_pb2 import Event

    for path in sorted((folder / FOLDER).glob("events.out.tfevents.*")):
        raw, kept, position = path.read_bytes(), [], 0
        while position + 12 <= len(raw):
            (length,) = struct.unpack("<Q", raw[position : position + 8])
            data = raw[position + 12 : position + 12 + length]
            position += 16 + length
            if len(data) < length:
                break  # a record cut short by a kill: gone with what follows it
            event = Event.FromString(data)
            if event.file_version or event.step <= step:
                kept.append(tfrecord(data))
        temporary = path.with_name(leftover_name(path.name, "tmp"))
        temporary.write_bytes(b"".join(kept))
        temporary.replace(path)
