"""What the command line sets up around one command, and undoes after it (never done on import: the library
stays free of signal handlers and process-wide settings).

- Everything printed on stdout and stderr passes through gpudoctor.redact.
- gpudoctor becomes a child subreaper, and every child still running at the end (or at SIGINT/SIGTERM) is
  killed with what it started (gpudoctor.probes.command).
- SIGTERM ends the command like Ctrl-C does, with its own exit status: SIGINT 130, SIGTERM 143 (128 + signal).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, List

from gpudoctor.probes.command import reaping
from gpudoctor.redact import RedactingStream, UnwritableStream, remember_env, remembering

EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived: unwind, clean up, exit 143. Like KeyboardInterrupt, no `except Exception` (a benchmark step
    judged as failed, a rendezvous error said in one line) takes it for an error of its own."""


def _terminate(signum, frame) -> None:
    raise Terminated()


unwritable: List[str] = []  # why standard output or error could not be written when the command ended


def _discard_buffered() -> None:
    """Point standard output and error at /dev/null, so that the interpreter's last flush of what they still buffer
    succeeds (it would print "Exception ignored" and exit 120)."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        os.dup2(null, fd)
    os.close(null)


@contextmanager
def guarded() -> Iterator[None]:
    with remembering():
        remember_env(os.environ)
        with _cleaned_up():
            yield


def closed_streams() -> List[str]:
    """The standard streams this process was started without (`>&-`, `2>&-`): Python holds None for them."""
    return [name for name, stream in (("standard output", sys.stdout), ("standard error", sys.stderr),
                                      ("standard input", sys.stdin)) if stream is None]


@contextmanager
def _cleaned_up() -> Iterator[None]:
    streams = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(sys.stdout, "standard output")
    sys.stderr = RedactingStream(sys.stderr, "standard error")
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    unwritable.clear()
    try:
        with reaping():
            yield
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # the reader went away (`| head`) or the stream is closed: nothing left to show
            except UnwritableStream as exc:
                unwritable.append(str(exc))
        sys.stdout, sys.stderr = streams
        if unwritable:  # what is still buffered for it goes nowhere, not into an error at the interpreter's exit
            _discard_buffered()
