"""Every child gpudoctor starts ends with it: one deadline per probe, the process group and a `setsid` grandchild
killed, a parent-death signal for a SIGKILLed gpudoctor, and SIGINT/SIGTERM exit 130/143 with the children gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, gpudoctor_cmd

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")


def _toolkit(tmp_path, path_nvcc: str, home_nvcc: str):
    """An environment whose PATH nvcc and $CUDA_HOME/bin/nvcc run these shell bodies."""
    bindir, home = tmp_path / "bin", tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    bindir.mkdir()
    for tool, body in ((bindir / "nvcc", path_nvcc), (home / "bin" / "nvcc", home_nvcc)):
        tool.write_text("#!/bin/sh\n" + body + "\n")
        tool.chmod(0o755)
    return dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", CUDA_HOME=str(home), PYTHONPATH=str(ROOT))


def _start(env, timeout: str = "30"):
    return subprocess.Popen(gpudoctor_cmd() + ["check", "--quick", "--format", "json", "--fail-on", "never",
                                               "--timeout", timeout],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"  # a zombie has ended
    except (FileNotFoundError, IndexError):
        return False


def _pids(path) -> list:
    return [int(word) for word in path.read_text().split()] if path.exists() else []


def _wait_for(predicate, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pidfile(tmp_path):
    path = tmp_path / "pids"
    yield path
    for pid in _pids(path):  # whatever a failing run left behind
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _all_gone(pidfile) -> bool:
    return _wait_for(lambda: not any(_alive(pid) for pid in _pids(pidfile)), 5)


def test_one_deadline_for_every_command_of_the_nvcc_probe(tmp_path, pidfile):
    """PATH's nvcc takes most of the 3 s; $CUDA_HOME's gets what is left, not 3 s more, and is not left running."""
    env = _toolkit(tmp_path, "sleep 2; echo 'Cuda compilation tools, release 12.4, V12.4.131'",
                   f"echo $$ >> {pidfile}; exec sleep 300")
    started = time.monotonic()
    process = _start(env, timeout="3")
    process.communicate(timeout=120)
    assert time.monotonic() - started < 60
    assert _all_gone(pidfile), "the toolkit's nvcc outlived gpudoctor"


def test_a_setsid_grandchild_is_killed_with_its_parent(tmp_path, pidfile):
    env = _toolkit(tmp_path, f"setsid sleep 300 & echo $! >> {pidfile}; echo $$ >> {pidfile}; sleep 300", "exit 1")
    process = _start(env, timeout="2")
    process.communicate(timeout=120)
    assert len(_pids(pidfile)) == 2 and _all_gone(pidfile), "a detached grandchild outlived gpudoctor"


def test_a_sigkilled_gpudoctor_takes_its_children_along(tmp_path, pidfile):
    env = _toolkit(tmp_path, f"echo $$ >> {pidfile}; exec sleep 300", "exit 1")
    process = _start(env)
    assert _wait_for(lambda: bool(_pids(pidfile))), "nvcc never started"
    process.kill()
    process.communicate(timeout=30)
    assert _all_gone(pidfile), "a child outlived a SIGKILLed gpudoctor (no parent-death signal)"


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_and_sigterm_exit_130_and_143_with_the_children_gone(tmp_path, pidfile, signum, code):
    env = _toolkit(tmp_path, f"echo $$ >> {pidfile}; exec sleep 300", "exit 1")
    process = _start(env)
    assert _wait_for(lambda: bool(_pids(pidfile))), "nvcc never started"
    process.send_signal(signum)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert _all_gone(pidfile)


class _Interrupted(Exception):
    pass


def _interrupt(signum, frame):
    raise _Interrupted()


def test_a_signal_another_thread_receives_ends_the_main_threads_wait_at_once():
    """The kernel may hand SIGTERM to a probe's or a pipe reader's thread; the main thread, waiting for the probes,
    must still run the handler within a slice, not when its wait ends (a SIGTERMed check ran on for 30 s)."""
    import threading

    from gpudoctor.waiting import SLICE_S, patiently

    previous = signal.signal(signal.SIGUSR1, _interrupt)
    never = threading.Event()
    worker = threading.Thread(target=lambda: (time.sleep(0.2), signal.pthread_kill(threading.get_ident(),
                                                                                   signal.SIGUSR1)), daemon=True)
    try:
        started = time.monotonic()
        worker.start()
        with pytest.raises(_Interrupted):
            patiently(never.wait, 10)
        assert time.monotonic() - started < 0.2 + 10 * SLICE_S
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert patiently(lambda seconds: True, 10) and not patiently(never.wait, 0.25)


def test_a_childs_output_is_capped_and_its_stderr_redacted(monkeypatch):
    """A probe printing without end keeps gpudoctor's memory bounded; a secret it prints on stderr (quoted in the
    probe's error) is hidden before anything keeps it."""
    from gpudoctor.probes import command

    monkeypatch.setattr(command, "OUTPUT_CAP", 1000)
    body = ("import sys; sys.stdout.write('x' * 3000000); "
            "sys.stderr.write('HTTP 401: Authorization: Bearer hf_QQQQQQQQQQQQQQQQQQQQQQ')")
    result = command.run_command([sys.executable, "-c", body], timeout=20)
    assert len(result.stdout) == 1000 and "QQQQ" not in result.stderr and "Authorization" in result.stderr
