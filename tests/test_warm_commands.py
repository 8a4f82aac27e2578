"""The suite's warm commands behave as the fresh process they stand for: arguments, standard
streams, directory, environment, exit status, ``atexit`` hooks, signals, a killed caller, and a
fresh interpreter where the environment differs in what a library reads on import."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import with_ctrl_c
from tests.warm_commands import warm_python

PROBE = """
import atexit, os, sys, threading, time
atexit.register(lambda: print("atexit ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread joined"))).start()
print(sys.argv[1:], os.getcwd(), os.environ.get("BISTACK_PROBE"), sys.stdin.read().upper())
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def both(argv: list[str], **options) -> list[subprocess.CompletedProcess]:
    """The command run by a fresh ``python`` and by the warm one."""
    return [
        subprocess.run([*python, *argv], capture_output=True, text=True, timeout=120, **options)
        for python in ([sys.executable], warm_python())
    ]


def test_a_warm_command_is_what_a_fresh_one_is(tmp_path):
    env = os.environ | {"BISTACK_PROBE": "x"}
    fresh, warm = both(["-c", PROBE, "3", ""], input="in", cwd=tmp_path, env=env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )
    assert fresh.returncode == 3 and f"['3', ''] {tmp_path} x IN" in fresh.stdout
    assert fresh.stdout.index("thread joined") < fresh.stdout.index("atexit ran")


def test_a_module_and_a_failure_run_as_python_runs_them():
    fresh, warm = both(["-m", "bistack", "info", "/nowhere"])
    assert (warm.returncode, warm.stdout, warm.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )
    assert fresh.returncode == 2 and "/nowhere" in fresh.stderr
    fresh, warm = both(["-c", "raise ValueError('boom')"])
    assert warm.returncode == fresh.returncode == 1 and "ValueError: boom" in warm.stderr


def test_a_signal_that_comes_before_the_command_runs_reaches_it():
    """A Ctrl-C that comes while the caller is still starting or handing the command over
    waits, then goes to the command, as to a process started directly (it once ended the
    caller alone, or was lost in the command's after-fork hooks, the command left running).
    The caller starts with SIGINT blocked, so the signal is surely early, whatever the load."""
    wait = "import sys, time\ntry:\n print('up', flush=True)\n time.sleep(60)\n"
    wait += "except KeyboardInterrupt:\n print('interrupted', flush=True)\n sys.exit(7)\n"
    caller = [*warm_python(), "-c", wait]
    blocked = "import os, signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\n"  # Ctrl-C's
    blocked += "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
    blocked += f"print('blocked', flush=True)\nos.execv(sys.executable, {caller!r})\n"
    process = subprocess.Popen(
        [sys.executable, "-S", "-c", blocked],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout.readline() == "blocked\n"  # (the mask and the pid outlive exec)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    if out:  # the command's code had begun: it was interrupted there (within a print, maybe)
        assert process.returncode == 7 and out.endswith("interrupted\n"), (out, err)
    else:  # before its code began, as a fresh interpreter can be while starting
        assert process.returncode != 0 and "KeyboardInterrupt" in err, err


def test_signals_reach_the_command_and_a_killed_caller_takes_it_along(tmp_path):
    wait = "import sys, time\ntry:\n print('up', flush=True)\n time.sleep(60)\n"
    wait += "except KeyboardInterrupt:\n print('interrupted', flush=True)\n sys.exit(7)\n"
    process = subprocess.Popen(
        [*warm_python(), "-c", wait], stdout=subprocess.PIPE, text=True, preexec_fn=with_ctrl_c
    )
    assert process.stdout.readline() == "up\n"
    process.send_signal(signal.SIGINT)
    # Waits for the exit it asserts: a forked copy of a process that imported torch ends (its
    # threads joined, its atexit hooks run) in seconds alone, and took over 30 s once under load.
    assert process.wait(timeout=180) == 7 and process.stdout.read() == "interrupted\n"
    marker = tmp_path / "pid"
    keep = f"import os, time\nopen({str(marker)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)"
    process = subprocess.Popen([*warm_python(), "-c", keep])
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.05)
    process.kill()
    process.wait(timeout=180)
    command = int(marker.read_text())
    while time.monotonic() < deadline:
        try:
            os.kill(command, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the command outlived its killed caller")


def test_a_command_ignores_the_signals_its_caller_ignores_as_a_fresh_one_does():
    """Run in the background (``make test &``), the suite ignores SIGINT, and so does a fresh
    ``python`` it starts; a warm command too, and it takes Ctrl-C where its caller does."""
    probe = "import signal; print([str(signal.getsignal(s)) for s in (2, 15, 1)])"
    for preexec in (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN), with_ctrl_c):
        fresh, warm = both(["-c", probe], preexec_fn=preexec)
        assert warm.stdout == fresh.stdout and fresh.returncode == 0, (fresh, warm)


def test_an_environment_a_library_reads_on_import_gets_a_fresh_interpreter():
    probe = "import sys; print('torch' in sys.modules)"
    env = os.environ | {"HF_HOME": "/elsewhere"}
    fresh, warm = both(["-c", probe], env=env)
    assert warm.stdout == fresh.stdout == "False\n"
    assert both(["-c", probe])[1].stdout == "True\n"  # the same environment: the warm one
