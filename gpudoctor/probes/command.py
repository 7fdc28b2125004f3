"""Run an external command with a hard time limit. argv lists only, never a shell.

Every child is killed with everything it started:
- it gets its own process group, so a timeout kills the group (a hung `nvidia-smi` wrapper script that sleeps, a
  torch import stuck in CUDA init);
- on Linux it gets a parent-death signal (SIGKILL), so it dies with gpudoctor even when gpudoctor is SIGKILLed (a
  Prolog's `timeout -k`);
- a grandchild that left the group with `setsid` comes back to gpudoctor once its parent dies, when gpudoctor is
  a child subreaper (`reaping`, done by the CLI around one command, never on import), and `kill_strays` ends it.
A probe that runs several commands shares one deadline among them (`Deadline`).
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Optional, Sequence, Set

from gpudoctor.redact import redact_text

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

_started: Dict[int, subprocess.Popen] = {}  # pid -> the children run_command is running now
_started_lock = threading.Lock()
_not_ours: Set[int] = set()  # children the process had before `reaping` began: never strays
_launch = threading.local()  # a thread's event to set once its next child has started (announce_launch)
_reaping = {"active": False, "scanned": False}  # within `reaping`: whether _not_ours was taken (at the first command)
OUTPUT_CAP = 8 * 2 ** 20  # bytes of a child's stdout, and of its stderr, that are kept


class CommandTimeout(TimeoutError):
    """The command ran past its limit and was killed; `stdout` and `stderr`: what it wrote before."""

    stdout = ""
    stderr = ""


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it ended."""

    returncode: int
    stdout: str
    stderr: str


class Deadline:
    """One time budget shared by the commands of one probe: each gets what is left, none the full amount again."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, what: str) -> float:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise CommandTimeout(f"{what} not started: the probe's {self.seconds:g} s were used up")
        return remaining


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _die_with_parent(parent: int) -> None:
    """In the child, before exec: SIGKILL when the parent dies; if it already has, stop here."""
    _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(137)


@contextmanager
def reaping() -> Iterator[None]:
    """While it lasts, orphaned descendants (a grandchild that called `setsid`, then lost its parent) become
    children of this process, so that `kill_strays` can end them; at its end every child run_command started, and
    every stray, is killed. Process-wide: for the CLI around one command, not for a library caller."""
    previous = ctypes.c_int(0)
    if _PRCTL:
        _PRCTL(PR_GET_CHILD_SUBREAPER, ctypes.byref(previous), 0, 0, 0)
        _PRCTL(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    _reaping.update(active=True, scanned=False)
    try:
        yield
    finally:
        kill_all()
        _reaping.update(active=False, scanned=False)
        if _PRCTL:
            _PRCTL(PR_SET_CHILD_SUBREAPER, previous.value, 0, 0, 0)


def _child_pids() -> Set[int]:
    """This process's children: each thread's /proc/self/task/TID/children (Linux 3.5+ as distributions build it, a
    few small reads), else psutil's scan of every process of the machine (~10 ms on a busy node)."""
    if os.path.exists(f"/proc/self/task/{os.getpid()}/children"):
        pids: Set[int] = set()
        for task in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{task}/children") as handle:
                    pids.update(int(word) for word in handle.read().split())
            except FileNotFoundError:  # a thread that ended meanwhile
                continue
        return pids
    import psutil

    try:
        return {child.pid for child in psutil.Process().children()}
    except psutil.Error:
        return set()


def announce_launch(event: threading.Event) -> None:
    """Set `event` once the next child this thread runs has started (a probe's thread: run_probes lets its own work
    wait for the children to start)."""
    _launch.event = event


def run_command(
    argv: Sequence[str],
    timeout: float,
    env: Optional[Mapping[str, str]] = None,
    stdin_text: Optional[str] = None,
) -> CommandResult:
    """Run argv; raise FileNotFoundError if the program is missing, CommandTimeout after `timeout` seconds."""
    parent = os.getpid()
    with _started_lock:  # a stray sweep never mistakes a child being started for a stray
        if _reaping["active"] and not _reaping["scanned"]:  # the children this process had before any command ran
            _not_ours.update(_child_pids())
            _reaping["scanned"] = True
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
            preexec_fn=(lambda: _die_with_parent(parent)) if _PRCTL else None,
        )
        _started[process.pid] = process
    if getattr(_launch, "event", None) is not None:
        _launch.event.set()
    try:
        out, err = _communicate(process, stdin_text.encode() if stdin_text else None, timeout)
        for pipe in (process.stdout, process.stderr):  # read to their end: closed now, not when collected
            if pipe is not None:
                pipe.close()
    except subprocess.TimeoutExpired as exc:
        _kill_group(process)
        kill_strays()
        timeout_error = CommandTimeout(f"{argv[0]} did not finish within {timeout:g} s")
        timeout_error.stdout = (exc.output or b"").decode("utf-8", "replace")
        timeout_error.stderr = redact_text((exc.stderr or b"").decode("utf-8", "replace"))
        raise timeout_error from None
    finally:
        with _started_lock:
            _started.pop(process.pid, None)
    # stderr is only ever quoted (a probe's error): its secrets are hidden before anything keeps it
    return CommandResult(process.returncode, out.decode("utf-8", "replace"),
                         redact_text(err.decode("utf-8", "replace")))


def _drain(stream, kept: list) -> None:
    """Read a child's pipe to its end, keeping its first OUTPUT_CAP bytes (the rest is read and dropped, so the
    child never blocks on a full pipe and gpudoctor's memory stays bounded)."""
    size = 0
    try:
        read = getattr(stream, "read1", stream.read)  # what has arrived, not a full block: kept if the child hangs
        for block in iter(lambda: read(65536), b""):
            if size < OUTPUT_CAP:
                kept.append(block[:OUTPUT_CAP - size])
                size += len(kept[-1])
    except (OSError, ValueError):  # closed under us: a grandchild kept the pipe open past the deadline
        pass


def _communicate(process: subprocess.Popen, stdin: Optional[bytes], timeout: float):
    """`Popen.communicate` with each output capped at OUTPUT_CAP bytes; TimeoutExpired after `timeout` s."""
    outputs: tuple = ([], [])
    readers = [threading.Thread(target=_drain, args=(stream, kept), daemon=True)
               for stream, kept in zip((process.stdout, process.stderr), outputs)]
    for reader in readers:
        reader.start()
    if process.stdin:
        try:
            process.stdin.write(stdin or b"")
            process.stdin.close()
        except (BrokenPipeError, OSError):
            pass
    end = time.monotonic() + timeout
    try:
        _wait(process, timeout)
        for reader in readers:  # output still arriving from a grandchild after the child's exit gets what is left
            reader.join(max(0.0, end - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(process.args, timeout)
    except subprocess.TimeoutExpired as exc:  # what arrived before the deadline
        exc.output, exc.stderr = b"".join(outputs[0]), b"".join(outputs[1])
        raise
    return b"".join(outputs[0]), b"".join(outputs[1])


def _wait(process: subprocess.Popen, timeout: float) -> None:
    """`process.wait(timeout)`, woken by the child's exit: Popen.wait with a timeout polls, sleeping up to 50 ms
    between looks, and every probe would pay that after its child ended. Linux 5.3+ tells the exit through a pidfd;
    elsewhere Popen.wait it is."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux, an older kernel, or the child already reaped
        process.wait(timeout=timeout)
        return
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(process.args, timeout)
    finally:
        os.close(pidfd)
    process.wait(timeout=timeout)  # it has exited: reaped at once


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait(timeout=2)  # the pipe readers end when the last holder of the pipes (a stray, killed next) does


def kill_strays() -> None:
    """Kill the descendants this process adopted as a subreaper (they outlived the child that started them). Within
    `reaping` before any command ran, none can be: nothing to look for."""
    with _started_lock:
        if _reaping["active"] and not _reaping["scanned"]:
            return
        strays = [pid for pid in _child_pids() if pid not in _started and pid not in _not_ours and _adopted(pid)]
        for pid in strays:
            try:
                if _leads_group(pid):
                    os.killpg(pid, signal.SIGKILL)  # it and what it started in its own session
                else:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
    for pid in strays:
        try:
            os.waitpid(pid, 0)  # reap it: no zombie left behind
        except ChildProcessError:
            pass


def kill_all() -> None:
    """End every child still running (the CLI's last act, and on SIGINT/SIGTERM), then the strays."""
    with _started_lock:
        running = list(_started.values())
    for process in running:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    kill_strays()


def _adopted(pid: int) -> bool:
    """A child in a process group of its own that run_command did not start: an orphan that came back (children this
    process starts otherwise, such as multiprocessing workers, share its group and are left alone)."""
    try:
        return os.getpgid(pid) != os.getpgid(0)
    except (ProcessLookupError, PermissionError):
        return False


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False
