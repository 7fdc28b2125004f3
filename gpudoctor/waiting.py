"""Waiting in the main thread without holding back Ctrl-C and SIGTERM.

Python runs a signal's handler in the main thread, when that thread next runs bytecode. The kernel may hand a
process's signal to any of its threads (a probe's, a pipe reader's, a rendezvous helper's); the main thread, blocked
in one long lock wait (`Event.wait`, `Thread.join`), then runs the handler only when the wait ends. Waiting in slices
bounds that delay to one slice."""

from __future__ import annotations

import threading
import time
from typing import Callable

SLICE_S = 0.1


def patiently(wait_once: Callable[[float], bool], seconds: float) -> bool:
    """Wait up to `seconds` in slices of SLICE_S; `wait_once(s)` blocks at most s and says whether the wait is over.
    True when it is, False when the time ran out."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if wait_once(max(0.0, min(SLICE_S, left))):
            return True
        if left <= SLICE_S:
            return False


def joined(thread: threading.Thread, slice_s: float) -> bool:
    """A `wait_once` step for a thread: join it for at most `slice_s`; whether it has ended."""
    thread.join(slice_s)
    return not thread.is_alive()
