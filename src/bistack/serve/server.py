"""``bistack serve``: bind the port, then run the app on uvicorn over that socket."""

from __future__ import annotations

import socket

from bistack.errors import ConfigError
from bistack.serve.app import Limits, create_app
from bistack.serve.served import Served


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening; a clear error when it cannot be."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio turns Nagle's algorithm off only on sockets that
    # say they are TCP, and with it on every keep-alive response waited ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until the server accepts them
    except OSError as error:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


def serve(served: Served, host: str, port: int, limits: Limits, model: str) -> None:
    """Serve ``served`` on ``host:port`` until stopped, saying where."""
    import uvicorn

    sock = listening_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(
        f"serving {served.description} from {model} on http://{shown_host}:{bound_port} "
        "(the page at /, the API docs at /docs); Ctrl-C stops",
        flush=True,
    )
    config = uvicorn.Config(create_app(served, limits), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
