"""A small gloo training loop that fails one way on one rank; tools/record_run_failures.py starts it under torchrun.

FAIL_MODE (environment) picks the failure, at step FAIL_STEP (default 3), on rank FAIL_RANK (default 1):
  raise     the rank raises an exception in its step
  sigkill   the rank is killed by SIGKILL (as the kernel's OOM killer or a scheduler would)
  sleep     the rank sleeps before the step's all-reduce until the others time out (TIMEOUT_S, default 5 s)
  mismatch  the rank calls broadcast where the others call all_reduce
On an exception every rank writes its flight-recorder dump (as NCCL's watchdog does on a timeout) to
TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank, the pickle and its JSON form.
"""

import datetime
import logging
import os
import signal
import time

import torch
import torch.distributed as dist

logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
log = logging.getLogger("train")


def dump_flight_recorder(rank: int) -> None:
    prefix = os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if not prefix:
        return
    from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

    with open(f"{prefix}{rank}", "wb") as out:
        out.write(_dump_fr_trace(True, True, False))
    with open(f"{prefix}{rank}.json", "wb") as out:
        data = _dump_fr_trace_json(True, True)
        out.write(data if isinstance(data, bytes) else data.encode())


def main() -> None:
    mode = os.environ.get("FAIL_MODE", "")
    fail_rank = int(os.environ.get("FAIL_RANK", "1"))
    fail_step = int(os.environ.get("FAIL_STEP", "3"))
    timeout = float(os.environ.get("TIMEOUT_S", "5"))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    grad = torch.ones(1024)
    try:
        for step in range(1, 6):
            time.sleep(0.2)
            if rank == fail_rank and step == fail_step:
                if mode == "raise":
                    raise ValueError(f"bad batch at step {step}: labels out of range")
                if mode == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if mode == "sleep":
                    time.sleep(timeout * 4)
            if mode == "mismatch" and rank == fail_rank and step == fail_step:
                dist.broadcast(grad, src=0)
            else:
                dist.all_reduce(grad)
            log.info("step %d loss %.4f", step, 1.0 / step)
    except Exception:
        log.exception("rank %d failed", rank)
        dump_flight_recorder(rank)
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
