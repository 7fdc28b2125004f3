"""Laying text out on a terminal: its width, whether to colour, and wrapping that never breaks a URL or a command.

Width: `COLUMNS` when set, else the terminal's width when the stream is one, else 80 (rich's convention).
Colour: never with `--no-color` or `NO_COLOR` (no-color.org), always with `FORCE_COLOR`, else on a terminal only.
Wrapping breaks lines at spaces only: a URL or path longer than the line stays whole (it may overflow), text in
backticks stays on one line, and a command is never broken (it moves left to fit, or overflows)."""

from __future__ import annotations

import io
import os
import re
import shutil
import textwrap
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # rich is imported when something is drawn: most commands start without it
    from rich.console import Console

DEFAULT_WIDTH = 80
NARROWEST = 40
# textwrap breaks at ASCII whitespace only, so a no-break space keeps words together; it is a space again on output
_GLUE = "\u00a0"
_BACKTICKS = re.compile(r"`[^`\n]+`")


def width(stream: Optional[IO] = None) -> int:
    columns = os.environ.get("COLUMNS", "")
    if columns.strip().isdigit() and int(columns) > 0:
        return max(NARROWEST, int(columns))
    if stream is not None and _isatty(stream):
        return max(NARROWEST, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


def color_refused(no_color: bool = False) -> bool:
    """--no-color, or NO_COLOR set to anything but the empty string (no-color.org)."""
    return no_color or bool(os.environ.get("NO_COLOR"))


def color(stream: Optional[IO], no_color: bool = False) -> bool:
    if color_refused(no_color):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return stream is not None and _isatty(stream)


def _isatty(stream: IO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def keep(text: str) -> str:
    """`text` that `wrap` keeps on one line (`0.3 s`, `Python 3.10.14`)."""
    return str(text).replace(" ", _GLUE)


def _glued(text: str) -> str:
    return _BACKTICKS.sub(lambda m: keep(m.group(0)), str(text))


def wrap(text: str, line_width: int, first: str = "", rest: str = "") -> List[str]:
    """`text` as lines of at most `line_width` (prefixes included), broken at spaces outside backticks only."""
    glued = _glued(text)
    lines: List[str] = []
    for number, paragraph in enumerate(glued.split("\n")):
        wrapped = textwrap.wrap(paragraph, line_width, initial_indent=first if number == 0 else rest,
                                subsequent_indent=rest, break_long_words=False, break_on_hyphens=False)
        lines += wrapped or [(first if number == 0 else rest).rstrip()]
    return [line.replace(_GLUE, " ") for line in lines]


def fix_block(text: str) -> Tuple[str, List[str]]:
    """A fix's text as (its first line, the lines after it): those are a block to paste (YAML, shell, JSON),
    their common indentation taken off."""
    first, _, block = (text or "").partition("\n")
    return first, textwrap.dedent(block).splitlines()


def say_block(console: Console, lines: List[str], *indents: str) -> None:
    """Lines to paste exactly as written: never wrapped, after the first of `indents` (else none) that keeps the
    widest within the width; past the width when even that cannot hold it."""
    from rich.text import Text

    widest = max((len(line) for line in lines), default=0)
    prefix = next((p for p in indents if len(p) + widest <= console.width), "")
    for line in lines:
        console.print(Text(prefix + line, style="cyan"))


def command_line(command: str, line_width: int, prompt: str, short_prompt: str = "   $ ") -> str:
    """A shell command is never broken: after `prompt` when it fits, else after `short_prompt` (and past the
    width only when even that cannot hold it)."""
    return (prompt if len(prompt) + len(command) <= line_width else short_prompt) + command


def say(console: Console, text: str, first: str = "", rest: str = "", style: str = "") -> None:
    """Print `text` wrapped to the console's width, every line in `style`."""
    from rich.text import Text

    for line in wrap(text, console.width, first, rest):
        console.print(Text(line, style=style))


@contextmanager
def screen(stream: IO, colored: bool, line_width: Optional[int] = None) -> Iterator[Console]:
    """A rich console that draws into `stream` at the terminal's width, trailing spaces removed."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(file=buffer, no_color=not colored, force_terminal=colored, color_system="auto" if colored
                      else None, highlight=False, soft_wrap=True, width=line_width or width(stream), emoji=False)
    yield console
    stream.write("\n".join(line.rstrip() for line in buffer.getvalue().split("\n")))
