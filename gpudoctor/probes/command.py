"""Run an external command with a hard time limit. argv lists only, never a shell.

The child gets its own process group so that a timeout kills it and everything it started
(a hung `nvidia-smi` wrapper script that sleeps, a torch import stuck in CUDA init).
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence


class CommandTimeout(TimeoutError):
    """The command ran past its limit and was killed."""


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: Optional[Mapping[str, str]] = None,
    stdin_text: Optional[str] = None,
) -> CommandResult:
    """Run argv; raise FileNotFoundError if the program is missing, CommandTimeout after `timeout` seconds."""
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin_text.encode() if stdin_text else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        raise CommandTimeout(f"{argv[0]} did not finish within {timeout:g} s") from None
    return CommandResult(process.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"))


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    try:
        process.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        # A grandchild in another session still holds the pipes: stop waiting for them.
        for stream in (process.stdout, process.stderr):
            if stream:
                stream.close()
        process.wait(timeout=2)
