"""A torchrun worker for tests/test_preflight.py: `gpudoctor preflight ARGS` with one node's trouble staged for real.

    python tests/preflight_worker.py MODE [preflight arguments]

MODE: `plain` (nothing staged); `stall` (hangs in start-up before preflight, as on a stuck file system); `die`
(SIGKILLs itself inside its first all-reduce, its peers in the collective with it); `hang` (SIGSTOPs itself
there instead: alive, its sockets open, and silent); `slow` (while it times its
device, its measuring thread is pinned to CPU 0 at nice 10, beside a busy loop it started there at nice 0: the
kernel's scheduler gives it about a tenth of what the loop gets, whatever else the machine does).
"""

import os
import signal
import sys
import time


def stall() -> None:
    time.sleep(3600)


def _in_first_all_reduce(signum: int) -> None:
    """Send this process `signum` inside its first all-reduce (the fabric phase's first collective): the all-reduce
    is started, so its peers are in it with this rank, and the signal comes before it can finish. Staged where the
    collective runs, not after a delay: on a fast machine the whole fabric phase is over within a fraction of a
    second, and a signal sent later would land after the report."""
    import torch.distributed as dist

    real = dist.all_reduce

    def signalled(*args, **kwargs):
        dist.all_reduce = real
        work = real(*args, **{**kwargs, "async_op": True})  # under way in gloo's threads
        os.kill(os.getpid(), signum)
        work.wait()  # frozen (SIGSTOP) never returns; killed (SIGKILL) never gets here

    dist.all_reduce = signalled


def die() -> None:
    _in_first_all_reduce(signal.SIGKILL)


def hang() -> None:
    _in_first_all_reduce(signal.SIGSTOP)  # alive but frozen: its peers wait in the collective


def _dies_with_this_process() -> None:
    """In the busy loop's child: SIGKILL when the thread that started it ends, however this process ends."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def slow() -> None:
    import subprocess

    from gpudoctor.preflight import measure

    real = measure.device_figures

    def starved(*args, **kwargs):
        # a busy loop on CPU 0, started from this process: same session, so the same scheduler autogroup, where
        # the nice value below counts (between autogroups the kernel shares CPU time equally, whatever the nice)
        loop = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c", "while True: pass"],
                                preexec_fn=_dies_with_this_process)
        try:
            os.sched_setaffinity(0, {0})  # this thread only (Linux: affinity and nice are per thread)
            os.nice(10)
            return real(*args, **kwargs)
        finally:
            loop.kill()
            loop.wait()

    measure.device_figures = starved


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"plain": lambda: None, "stall": stall, "die": die, "hang": hang, "slow": slow}[mode]()
    from gpudoctor.cli import main

    sys.exit(main(["preflight", *args]))
