"""Ctrl-C once asks a run to stop after the pages in flight; twice quits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from .conftest import PROJECT_ROOT

# A stand-in for a run that is busy reading: it loops until asked to stop, then takes its time to wind down.
BUSY = textwrap.dedent(
    """
    import sys, time
    from ocr_app.batch.shutdown import stop_on_signals
    with stop_on_signals(lambda line: print(line, flush=True)) as stop:
        print("reading", flush=True)
        while not stop.event.is_set():
            time.sleep(0.01)
        print("winding down", flush=True)
        time.sleep(30)
    sys.exit(stop.exit_code)
    """
)


def start() -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    process = subprocess.Popen([sys.executable, "-c", BUSY], env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "reading\n"
    return process


def test_first_ctrl_c_asks_to_stop_second_quits_at_once():
    process = start()
    process.send_signal(signal.SIGINT)
    assert "SIGINT: finishing the pages in flight" in process.stdout.readline()
    assert process.stdout.readline() == "winding down\n"
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=10) == 128 + signal.SIGINT
    assert time.monotonic() - started < 5


def test_sigterm_asks_to_stop_too():
    process = start()
    process.send_signal(signal.SIGTERM)
    assert "SIGTERM" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 128 + signal.SIGTERM
