"""The sockets ``bistack serve`` listens on: one for a single process; under ``--workers``, one
per worker, all bound to the same port (SO_REUSEPORT), so that the kernel spreads connections
over the workers."""

from __future__ import annotations

import socket

from bistack.errors import ConfigError

BACKLOG = 2048  # connections that wait for the server (or a worker) to accept them


def port_socket(host: str, port: int, shared: bool = False) -> socket.socket:
    """A TCP socket bound to ``host:port`` (a clear error when it cannot be); ``shared``: with
    SO_REUSEPORT, so that ``serve --workers``' processes can each bind the same port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off only on sockets that
    # say they are TCP, and with it on every keep-alive response waited ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if shared:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening; a clear error when it cannot be."""
    sock = port_socket(host, port)
    sock.listen(BACKLOG)  # connections wait in the backlog until the server accepts them
    return sock
