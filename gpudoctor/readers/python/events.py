"""What the script walk records: an event (a process start, a CUDA initialisation, a CUDA_VISIBLE_DEVICES
assignment …) with the call path that led to it, the bounded list of one walk's events, and the trace that records
them and says whether any was dropped."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple, Union

Located = Union[ast.expr, ast.stmt]  # a node with a line and a column


@dataclass
class Event:
    kind: str
    line: int
    column: int
    path: Tuple[str, ...]
    data: Dict[str, Any] = field(default_factory=dict)
    guarded: bool = False

    def relocated(self, frame: str, line: int, guarded: bool) -> Event:
        return Event(self.kind, self.line, self.column, (f"{frame}:{line}",) + self.path, self.data,
                     self.guarded or guarded)


class EventList(list):
    """Events of one walk, each site once (a CUDA_VISIBLE_DEVICES assignment again once CUDA has been initialised),
    and only the first CUDA initialisation: ordering needs no more, and summaries stay small."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.seen: set = set()
        self.cuda_seen = False

    def add(self, event: Event) -> bool:
        if event.kind == "cuda":
            if self.cuda_seen:
                return True
        key = (event.kind, event.line, event.column, event.data.get("call"), event.guarded,
               self.cuda_seen if event.kind == "cvd" else None)
        if key in self.seen:
            return True
        if len(self) >= self.limit:
            return False
        self.seen.add(key)
        self.append(event)
        if event.kind == "cuda":
            self.cuda_seen = True
        return True


@dataclass(frozen=True)
class At:
    """Where the walk is: the function it walks (`frame`: its name, or `<module>`), whether under an
    `if __name__ == "__main__":` guard, and the list its events go to."""

    frame: str
    guarded: bool
    out: EventList

    def under(self, guard: bool) -> At:
        """The same place inside a block that runs only when `guard` (a `__main__` guard's side) is true."""
        return At(self.frame, self.guarded or guard, self.out)


class Trace:
    """Records events into a walk's list; `truncated` once one was dropped (a list full, calls nested too deep)."""

    def __init__(self) -> None:
        self.truncated = False

    def emit(self, out: EventList, event: Event) -> None:
        if not out.add(event):
            self.truncated = True

    def event(self, at: At, kind: str, node: Located, **data: Any) -> None:
        """An event at `node`, in the frame the walk is at."""
        self.emit(at.out, Event(kind, node.lineno, node.col_offset + 1, (f"{at.frame}:{node.lineno}",), data,
                                at.guarded))
