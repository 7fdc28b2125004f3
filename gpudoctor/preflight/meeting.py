"""The launcher's rendezvous store as preflight's meeting point: who arrived, one verdict for all, who did not finish.

Every rank connects to the store the launcher already runs (torchrun's agent store, or the one rank 0 starts under
srun, at MASTER_ADDR:MASTER_PORT), writes its arrival and waits for the others until its deadline. Each decision
that ranks must share (all met, or who is missing; which collective failed and who is still alive) is written once
with compare_set: the first writer's verdict is everyone's. The process group then starts on the same store (a
connection of its own), gloo only: never NCCL before the ranks have agreed.
"""

from __future__ import annotations

import datetime
import json
import threading
from typing import Any, Callable, List, Optional

from gpudoctor.preflight import PreflightError
from gpudoctor.preflight.layout import Member
from gpudoctor.waiting import patiently


class StepFailed(Exception):
    """A collective step failed, passed its deadline, or another rank said that one did."""

    def __init__(self, step: str, error: str):
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = error


class StoreLost(PreflightError):
    """The rendezvous store stopped answering (the rank that held it ended)."""


def _line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def in_helper(call: Callable, seconds: float, give_up: Callable[[], bool] = lambda: False):
    """`call()` in a helper thread, waited for in slices (Ctrl-C and SIGTERM stay prompt) at most `seconds`, or
    until `give_up()`: (finished, value or exception). A collective stuck in C++ is left behind; preflight ends its
    process with os._exit."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            outcome.append((False, exc))

    helper = threading.Thread(target=run, daemon=True, name="gpudoctor-preflight")
    def ended(slice_s: float) -> bool:
        helper.join(slice_s)
        return not helper.is_alive() or give_up()

    helper.start()
    patiently(ended, seconds)
    return outcome[0] if outcome else None


class Meeting:
    def __init__(self, member: Member, environ_restart: str = "0"):
        self.member = member
        self.prefix = f"gpudoctor/preflight/{environ_restart}/"
        self.store = None

    # --- the store ---------------------------------------------------------------------------------------------
    def _connect(self, seconds: float, master: bool):
        import torch.distributed as dist

        def connect():
            return dist.TCPStore(self.member.master, self.member.port, None, master,
                                 datetime.timedelta(seconds=max(seconds, 1.0)), wait_for_workers=False)

        done = in_helper(connect, seconds)
        if done is None or not done[0]:
            why = f"nothing answered within {seconds:g} s" if done is None else _line(done[1])
            holder = "torchrun's agent on the first node" if self.member.agent_store else "rank 0"
            raise PreflightError(f"preflight: rank {self.member.rank} could not reach the rendezvous store at "
                                 f"{self.member.master}:{self.member.port}, which {holder} holds ({why})")
        return dist.PrefixStore(self.prefix, done[1])

    def _call(self, what: Callable):
        try:
            return what(self.store)
        except Exception as exc:  # noqa: BLE001 - the store's host went away: said once, in one line
            raise StoreLost(f"preflight: rank {self.member.rank} lost the rendezvous store at {self.member.master}:"
                            f"{self.member.port} ({_line(exc)}): the process that held it ended") from None

    def has(self, key: str) -> bool:
        return bool(self._call(lambda store: store.check([key])))

    def get_json(self, key: str):
        return json.loads(self._call(lambda store: store.get(key)))

    def decide(self, key: str, value) -> Any:
        """`value` as the verdict under `key` unless another rank decided first: the verdict, either way."""
        return json.loads(self._call(lambda store: store.compare_set(key, "", json.dumps(value))))

    # --- phase 1: meet -----------------------------------------------------------------------------------------
    def meet(self, seconds: float) -> dict:
        """Arrive and wait for every rank up to `seconds`: the verdict, `{"met": true}` or `{"met": false,
        "arrived": [arrivals]}`."""
        master = self.member.rank == 0 and not self.member.agent_store
        self.store = self._connect(seconds, master)
        world = self.member.world_size
        self._call(lambda store: store.set(f"arrived/{self.member.rank}", json.dumps(self.member.arrival())))
        self._call(lambda store: store.add("arrivals", 1))

        def settled(slice_s: float) -> bool:
            if self.has("verdict/meet"):
                return True
            if self._call(lambda store: store.add("arrivals", 0)) >= world:
                self.decide("verdict/meet", {"met": True})
                return True
            threading.Event().wait(slice_s)
            return False

        if not patiently(settled, seconds):
            self.decide("verdict/meet", {"met": False, "arrived": self.arrivals()})
        return self.get_json("verdict/meet")

    def arrivals(self) -> List[dict]:
        return [self.get_json(f"arrived/{rank}") for rank in range(self.member.world_size)
                if self.has(f"arrived/{rank}")]

    def process_group(self, seconds: float, collective_s: float):
        """The gloo process group of every rank, on a store connection of its own, started within `seconds`. Its
        collectives time out after `collective_s` (the rest of the budget): preflight's own deadline for each step
        comes first, and names the ranks that did not finish."""
        import torch.distributed as dist

        store = self._connect(seconds, False)

        def start():
            dist.init_process_group("gloo", store=dist.PrefixStore("group/", store), rank=self.member.rank,
                                    world_size=self.member.world_size,
                                    timeout=datetime.timedelta(seconds=max(seconds, collective_s, 1.0)))

        self.step("starting the process group", start, seconds)
        return dist

    # --- each collective step, and a failure ---------------------------------------------------------------------
    def step(self, step: str, call: Callable, seconds: float):
        """`call()` within `seconds`; a StepFailed when it raises, runs out of time, or another rank failed."""
        done = in_helper(call, seconds, lambda: self.has("failure"))
        if done is None:
            raise StepFailed(step, "another rank failed" if self.has("failure") else
                             f"not finished within {seconds:.3g} s")
        if not done[0]:
            raise StepFailed(step, _line(done[1]))
        return done[1]

    def settle_failure(self, failed: StepFailed, grace: float) -> dict:
        """After a failed step: the first failure posted, the ranks still alive (each says so and waits up to
        `grace` for the others), as one verdict for all: `{"step", "error", "rank", "alive": [...]}`."""
        first = self.decide("failure", {"step": failed.step, "error": failed.error, "rank": self.member.rank})
        self._call(lambda store: store.set(f"alive/{self.member.rank}", "1"))
        self._call(lambda store: store.add("alive", 1))
        world = self.member.world_size

        def everyone(slice_s: float) -> bool:
            if self._call(lambda store: store.add("alive", 0)) >= world or self.has("verdict/failure"):
                return True
            threading.Event().wait(slice_s)
            return False

        patiently(everyone, grace)
        alive = [rank for rank in range(world) if self.has(f"alive/{rank}")]
        return self.decide("verdict/failure", {**first, "alive": alive})

    def mark(self, key: str, on: bool) -> None:
        """Set or clear this rank's flag `key` (a rank timing its device)."""
        name = f"{key}/{self.member.rank}"
        self._call(lambda store: store.set(name, "1") if on else store.delete_key(name))

    def marked(self, key: str) -> List[int]:
        """The ranks whose flag `key` is set."""
        return [rank for rank in range(self.member.world_size) if self.has(f"{key}/{rank}")]

    # --- the exit status ------------------------------------------------------------------------------------------
    def post_exit(self, code: int) -> None:
        self._call(lambda store: store.set("exit", str(code)))

    def wait_exit(self, seconds: float) -> Optional[int]:
        """The reporting rank's exit status, or None when it said none within `seconds`; then say it was heard
        (under srun the reporting rank holds the store, and waits for that before it ends)."""
        def posted(slice_s: float) -> bool:
            if self.has("exit"):
                return True
            threading.Event().wait(slice_s)
            return False

        if not patiently(posted, seconds):
            return None
        code = int(self._call(lambda store: store.get("exit")))
        self._call(lambda store: store.add("heard", 1))
        return code

    def wait_heard(self, listeners: int, seconds: float) -> None:
        """On the rank that holds the store: wait (at most `seconds`) until `listeners` ranks took the exit status,
        so that none finds the store gone."""
        if not listeners or self.member.agent_store or self.member.rank != 0:
            return

        def heard(slice_s: float) -> bool:
            if self._call(lambda store: store.add("heard", 0)) >= listeners:
                return True
            threading.Event().wait(slice_s)
            return False

        patiently(heard, seconds)
