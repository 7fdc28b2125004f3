"""A progress bar for the benchmarks: rich's, on standard error, only where a person watches a terminal.

Rank 0 draws it (one bar per run: sizes for `bench nccl`, steps for `bench train`); other ranks, a pipe, a dumb
terminal or `--format json` get none. The bar is transient: the result printed after it is all that stays (after
Ctrl-C the bar stays, its line ended).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


def wanted(fmt: str) -> bool:
    """Draw a bar? Only for the human formats, when standard error is a terminal that can redraw a line."""
    if fmt == "json":
        return False
    from rich.console import Console

    console = Console(file=sys.stderr)
    return console.is_terminal and not console.is_dumb_terminal


@contextmanager
def bar(enabled: bool, total: int, what: str) -> Iterator[Callable[[str], None]]:
    """`advance(label)` after each unit of work; a no-op when not enabled."""
    if not enabled:
        yield lambda label: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(file=sys.stderr), transient=True)
    task = progress.add_task(what, total=total)
    with progress:
        try:
            yield lambda label: progress.update(task, advance=1, description=f"{what} {label}")
        except KeyboardInterrupt:  # the bar stays, its line ended: `gpudoctor: interrupted` goes on the next one
            progress.live.transient = False
            raise
