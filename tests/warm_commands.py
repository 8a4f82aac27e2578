"""Commands run as written, without paying their interpreter's start each time.

Most of the suite's commands are ``bistack ...`` in a fresh process, whose first two seconds
go to starting Python and importing torch and transformers before any work, and whose last
half second to the interpreter's teardown. Here one server process per test process imports
them once; a command hands its arguments, working directory, environment and standard streams
to it, and the server forks a copy of itself that runs what ``python`` would run for those
arguments (a script as ``__main__``, ``-m module``, ``-c code``, through ``runpy``) and exits
as that process would: non-daemon threads joined, ``atexit`` hooks run, streams flushed, the
teardown left to the process's end. The caller waits for that copy, passes it the signals it
gets (SIGTERM stops a server started with ``&``), and exits with its status; if the caller is
killed, the copy is killed too.

Two doors: :func:`warm_python` gives the argv prefix that stands for ``sys.executable`` in a
test's command; :func:`warm_console_script` puts a small ``bistack`` first on a PATH, for the
documentation's commands typed in bash as written.

A command whose environment differs from the server's by more than bistack's own variables
and what bash and pytest set (``BISTACK_*``, ``PWD``, ``SHLVL``, ``_``, the running test, the
terminal's size) runs in a fresh interpreter instead, as does a command with options for the
interpreter itself: a library may have read those variables while being imported. Tests of
what only a fresh process shows (its memory, its process tree, a SIGKILL at a random point) do
not come here.

Only the standard library is imported at the top: the caller's side runs this file.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# Environment differences a warm command may carry, each read when it is used rather than when
# a library is imported: bistack's own variables; what bash sets in every command it starts;
# the test pytest is running; the terminal's size (readline exports it in a process that imports
# it, as pytest does); and what a training run in the tests' own process leaves in its
# environment for the processes it starts (Lightning's seed, torch's CUDA check and compile
# cache folder).
WARM_ANYWAY = (
    *("PWD", "OLDPWD", "SHLVL", "_", "PYTEST_CURRENT_TEST", "COLUMNS", "LINES"),
    *("PL_GLOBAL_SEED", "PL_SEED_WORKERS", "PYTORCH_NVML_BASED_CUDA_CHECK"),
    "TORCHINDUCTOR_CACHE_DIR",
)
HEADER = 8  # bytes of the request's length, sent with the three standard streams
# What the caller passes on to its command (SIGTERM stops a server started with ``&``).
FORWARDED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
# What the suite's commands import: torch, transformers and bistack, whose modules are
# imported by the commands anyway (importing them all at once costs no more than that).
SUITE_MODULES = ["torch", "transformers", "bistack.*"]


def differs_only_harmlessly(imported: dict[str, str], request: dict[str, str]) -> bool:
    """Whether a command with environment ``request`` (bistack's command line's defaults
    added, as it adds them) may run in a fork of a server that imported in ``imported``."""
    return read_on_import(imported) == read_on_import(request)


def read_on_import(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` a library may read while it is imported."""
    return {k: v for k, v in env.items() if not k.startswith("BISTACK_") and k not in WARM_ANYWAY}


def send_line(connection: socket.socket, message: dict[str, object]) -> None:
    connection.sendall(json.dumps(message).encode() + b"\n")


# The server's side -----------------------------------------------------------------------


def serve(socket_path: str, modules: list[str], while_importing: dict[str, str]) -> None:
    """Import ``modules`` with the variables ``while_importing`` set where the environment has
    none (as bistack's command line sets them before its own imports), then fork a copy per
    request until terminated or its parent ends."""
    before = dict(os.environ)
    os.environ.update(imported := while_importing | before)
    for module in modules:
        import_all(module)
    os.environ.clear()
    os.environ.update(before)
    threads = len(os.listdir("/proc/self/task"))
    assert threads == 1, f"importing {modules} started {threads - 1} threads a fork would lose"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(16)
    print("ready", flush=True)
    parent = os.getppid()
    while True:
        if not select.select([listener], [], [], 1.0)[0]:
            if os.getppid() != parent:  # the tests' process is gone
                return
            continue
        connection, _ = listener.accept()
        while reap_one():
            pass
        if os.fork() == 0:  # a handler for this request, which forks the command's process
            listener.close()
            request = handle(connection, imported, while_importing)
            if request is not None:
                run(request)
            os._exit(0)
        connection.close()


def import_all(name: str) -> None:
    """Import module ``name``; ``package.*``: the package and every module under it."""
    import importlib
    import pkgutil

    module = importlib.import_module(name.removesuffix(".*"))
    if name.endswith(".*"):
        for found in pkgutil.walk_packages(module.__path__, f"{module.__name__}."):
            if not found.name.endswith(".__main__"):
                importlib.import_module(found.name)


def reap_one() -> bool:
    with contextlib.suppress(ChildProcessError):
        return os.waitpid(-1, os.WNOHANG)[0] != 0
    return False


def receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, HEADER, 3)
    while len(data) < HEADER:
        data += connection.recv(HEADER - len(data))
    size = int.from_bytes(data, "big")
    body = b""
    while len(body) < size:
        body += connection.recv(size - len(body))
    return json.loads(body), fds


def handle(
    connection: socket.socket, imported: dict[str, str], defaults: dict[str, str]
) -> dict | None:
    """In the handler: fork the command's process, tell the caller its pid, wait for it (or
    for the caller's end, which kills it) and send its status. Returns the request in the
    command's process, None in the handler once it is done."""
    request, fds = receive(connection)
    if not differs_only_harmlessly(imported, defaults | request["env"]):
        with contextlib.suppress(OSError):  # (a caller already gone needs no answer)
            send_line(connection, {"cold": True})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    # Signals wait until the command's own code runs (run() lets them through): one taken by
    # the copy's after-fork hooks would be lost, the command left running.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    pid = os.fork()
    if pid == 0:
        connection.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        return request
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    for fd in fds:
        os.close(fd)
    process = os.pidfd_open(pid)
    try:
        send_line(connection, {"pid": pid})
    except OSError:  # the caller is gone already
        os.kill(pid, signal.SIGKILL)
    ready, _, _ = select.select([process, connection], [], [])
    if process not in ready:  # the caller is gone (killed): so is its command
        os.kill(pid, signal.SIGKILL)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with contextlib.suppress(OSError):
        send_line(connection, {"status": code if code >= 0 else 128 - code})
    return None


def run(request: dict) -> None:
    """What ``python`` runs for the request's arguments, in its directory and environment,
    then this process's end as the interpreter's would be (its teardown aside)."""
    import runpy
    import threading
    import types

    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    kind, target, *arguments = request["argv"]
    for number in FORWARDED:  # as a fresh interpreter started by the caller would have them
        ignored = number in request["ignored"]
        default = signal.default_int_handler if number == signal.SIGINT else signal.SIG_DFL
        signal.signal(number, signal.SIG_IGN if ignored else default)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)  # one waiting arrives here
        if kind == "-m":
            sys.argv = ["-m", *arguments]  # runpy puts the module's file first
            sys.path[0] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif kind == "-c":
            sys.argv = ["-c", *arguments]
            sys.path[0] = ""
            main = sys.modules["__main__"] = types.ModuleType("__main__")
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.argv = [target, *arguments]
            sys.path[0] = str(Path(target).resolve().parent)
            runpy.run_path(target, run_name="__main__")
        code = 0
    except SystemExit as exit:
        code = exit_status(exit.code)
    except BaseException:  # as the interpreter reports one
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


# The caller's side -----------------------------------------------------------------------


def call(socket_path: str, argv: list[str]) -> None:
    """Hand ``python argv`` to the server with this process's directory, environment and
    standard streams; exit with the command's status."""
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-m", "-c")):
        os.execv(sys.executable, [sys.executable, *argv])  # options of the interpreter's own
    # A signal that comes before the command's pid is known waits, then goes to the command
    # (as it would reach a process started directly), rather than ending this caller alone.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    # Those this process ignores (a background job ignores SIGINT; so would a fresh python).
    ignored = [int(s) for s in FORWARDED if signal.getsignal(s) == signal.SIG_IGN]
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    if argv[0] not in ("-m", "-c"):
        argv = ["", *argv]
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "ignored": ignored}
    body = json.dumps(request).encode()
    socket.send_fds(connection, [len(body).to_bytes(HEADER, "big")], [0, 1, 2])
    connection.sendall(body)
    replies = connection.makefile("r")
    line = replies.readline()
    if not line:
        sys.exit(f"the warm server closed without running {argv}")
    if json.loads(line).get("cold"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)  # (a waiting one ends us here)
        os.execv(sys.executable, [sys.executable, *(argv[1:] if argv[0] == "" else argv)])
    pid = json.loads(line)["pid"]

    def forward(number: int, _: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, number)

    for number in FORWARDED - set(ignored):
        signal.signal(number, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    line = replies.readline()
    sys.exit(json.loads(line)["status"] if line else 1)


# The tests' side -------------------------------------------------------------------------


@contextlib.contextmanager
def warm_server(folder: Path, env: dict[str, str], modules: list[str]) -> Iterator[list[str]]:
    """A server with ``modules`` imported in ``env``; yields the argv prefix that stands for
    ``sys.executable``."""
    from bistack.system.environment import MODEL_PROCESS_ENVIRONMENT

    folder.mkdir(parents=True, exist_ok=True)
    socket_path = str(folder / "server.sock")
    server = subprocess.Popen(
        [sys.executable, __file__, "serve", socket_path, json.dumps(MODEL_PROCESS_ENVIRONMENT),
         *modules],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and server.stdout.readline() == "ready\n"
        yield [sys.executable, "-S", __file__, "call", socket_path]
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def warm_console_script(
    folder: Path, env: dict[str, str], name: str
) -> Iterator[tuple[dict[str, str], list[str]]]:
    """A warm server for the console script ``name`` beside ``sys.executable``; yields ``env``
    with a folder holding a small ``name`` first on its PATH, which hands the script's
    commands to the server, and the server's argv prefix for ``sys.executable``."""
    shim = folder / "bin" / name
    shim.parent.mkdir(parents=True)
    warm = env | {"PATH": f"{shim.parent}:{env['PATH']}"}
    with warm_server(folder, warm, SUITE_MODULES) as python:
        script = Path(sys.executable).parent / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.join([*python, str(script)])} "$@"\n')
        shim.chmod(0o755)
        yield warm, python


_RUNNING: list[tuple[dict[str, str], list[str], contextlib.ExitStack]] = []


def warm_python() -> list[str]:
    """The argv prefix that stands for ``sys.executable`` in this test process's commands: a
    server with the process's environment, started at the first call and again when what a
    library reads on import has changed since, stopped at the process's end."""
    from bistack.system.environment import MODEL_PROCESS_ENVIRONMENT

    env = dict(os.environ)
    if not _RUNNING or not differs_only_harmlessly(
        MODEL_PROCESS_ENVIRONMENT | _RUNNING[0][0], MODEL_PROCESS_ENVIRONMENT | env
    ):
        import tempfile

        if _RUNNING:
            _RUNNING.pop()[2].close()
        else:
            atexit.register(lambda: _RUNNING and _RUNNING.pop()[2].close())
        stack = contextlib.ExitStack()
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bistack-warm-")))
        _RUNNING.append((env, stack.enter_context(warm_server(folder, env, SUITE_MODULES)), stack))
    return _RUNNING[0][1]


def warm_bistack() -> list[str]:
    """The argv prefix that stands for ``python -m bistack`` (:func:`warm_python`)."""
    return [*warm_python(), "-m", "bistack"]


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[4:], json.loads(sys.argv[3]))
    else:
        call(sys.argv[2], sys.argv[3:])
