"""Stopping a batch run cleanly: the first Ctrl-C (SIGINT) or SIGTERM asks the run
to stop after the pages in flight; a second one exits at once.

Exiting at once is safe for the state store: SQLite rolls back a transaction
that was cut off, exactly as after a SIGKILL.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class StopRequest:
    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None

    @property
    def exit_code(self) -> int:
        return 128 + self.signum if self.signum is not None else 0


@contextmanager
def stop_on_signals(notice: Callable[[str], None]) -> Iterator[StopRequest]:
    """Install the handlers for the duration of a run; the old ones come back afterwards."""
    request = StopRequest()

    def handle(signum: int, frame) -> None:
        if request.event.is_set():
            os._exit(128 + signum)
        request.signum = signum
        request.event.set()
        notice(f"{signal.Signals(signum).name}: finishing the pages in flight, then stopping (again to quit at once)")

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
