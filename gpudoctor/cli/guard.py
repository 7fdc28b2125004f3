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
from typing import Iterator

from gpudoctor.probes.command import reaping
from gpudoctor.redact import RedactingStream, remember_env, remembering

EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived: unwind, clean up, exit 143. Like KeyboardInterrupt, no `except Exception` (a benchmark step
    judged as failed, a rendezvous error said in one line) takes it for an error of its own."""


def _terminate(signum, frame) -> None:
    raise Terminated()


@contextmanager
def guarded() -> Iterator[None]:
    with remembering():
        remember_env(os.environ)
        with _cleaned_up():
            yield


@contextmanager
def _cleaned_up() -> Iterator[None]:
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
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
        sys.stdout, sys.stderr = streams
