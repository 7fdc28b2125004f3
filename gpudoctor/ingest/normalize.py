"""Undo what copying, pasting and quoting do to a tool's output, keeping the original line numbers.

Handled: CRLF/CR line ends, ANSI colour codes (raw ESC, or mangled to ``#033[92m`` / ``^[[92m`` / a bare
``[92m``), full-width colons and spaces, non-breaking and zero-width spaces, typographic apostrophes, control
characters and NULs, ``> `` e-mail/Markdown quoting (nested too), shell prompt lines (``$ nvidia-smi``,
``user@host:~$ …``, ``(env) $ …``, ``PS C:\\> …``), common indentation, tabs, and nvidia-smi table rows that
a terminal or mail client wrapped onto a second line. Lines longer than ``MAX_LINE`` characters are cut for
the line parsers (no real report line is that long) so that no regular expression sees unbounded input.

Everything here is linear in the size of the text.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple, Union

MAX_LINE = 8192

# ESC [ … letter, raw or mangled in transit; each form starts with a literal that is looked for first.
_ANSI_FORMS = (
    ("\x1b", re.compile(r"\x1b(?:\[[0-9;?]{0,20}[A-Za-z]|[()][0-9A-Za-z])")),
    ("#033[", re.compile(r"#033\[[0-9;?]{0,20}[A-Za-z]")),
    ("^[[", re.compile(r"\^\[\[[0-9;?]{0,20}[A-Za-z]")),
    ("\\", re.compile(r"\\(?:033|x1b|e|u001b)\[[0-9;?]{0,20}[A-Za-z]")),
    ("m", re.compile(r"\[(?:[0-9]{1,3};){0,4}[0-9]{1,3}m")),  # '[92m' left after the ESC was lost
)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\u2028\u2029]")
_QUOTED = re.compile(r"\n[ \t]{0,8}>")
_QUOTE = re.compile(r"(?m)^[ \t]*>(?:[ \t]?>){0,20}[ \t]?")
_PROMPT = re.compile(  # matched against the line without its leading blanks
    r"(?:"
    r"(?:\([^()\s]{1,64}\)[ \t]*)?"                      # (base) / (venv)
    r"(?:\[[^\]\n]{1,100}\][ \t]*)?"                     # [user@host dir]
    r"(?:[\w.\-]{1,64}@[\w.\-]{1,64}(?::[^\s$#%]{0,200})?[ \t]*)?"  # user@host:~/dir
    r"[$#%][ \t]+\S"                                      # $ cmd / # cmd / % cmd
    r"|(?:PS[ \t]+)?[A-Za-z]:\\[^>\n]{0,200}>[ \t]*\S"   # C:\Users\me> cmd / PS C:\> cmd
    r")"
)

# Characters that pasting introduces: full-width colon/space, NBSP, zero-width, BOM, typographic quotes.
_REPLACE = (
    ("\uff1a", ":"), ("\ufe55", ":"), ("\u3000", " "), ("\u00a0", " "), ("\u2007", " "), ("\u202f", " "),
    ("\u200b", ""), ("\u200c", ""), ("\u200d", ""), ("\ufeff", ""), ("\u2060", ""),
    ("\u2018", "'"), ("\u2019", "'"), ("\u02bc", "'"), ("\u2032", "'"), ("\u201c", '"'), ("\u201d", '"'),
)


class Lines:
    """A normalised text: ``lines`` for the line parsers, ``nos`` their 1-based line numbers in the text as
    given, and ``text`` the whole normalised text (uncut, before line-level changes; used by the XML parser)."""

    __slots__ = ("lines", "nos", "text")

    def __init__(self, lines: List[str], nos: List[int], text: str):
        self.lines = lines
        self.nos = nos
        self.text = text

    def __len__(self) -> int:
        return len(self.lines)


def clean_text(raw: Union[str, bytes, None]) -> str:
    """Character-level clean-up of the whole text (keeps the number of lines)."""
    if raw is None:
        return ""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        raw = str(raw)
    text = raw.replace("\r\n", "\n").replace("\r", "\n")
    for literal, pattern in _ANSI_FORMS:
        if literal in text:
            text = pattern.sub("", text)
    text = _CONTROL.sub("", text)
    if not text.isascii():
        for old, new in _REPLACE:
            if old in text:
                text = text.replace(old, new)
    if text.lstrip(" \t").startswith(">") or _QUOTED.search(text):
        text = _QUOTE.sub("", text)
    return text


def _is_table_line(s: str) -> bool:
    return s.startswith("|") or s.startswith("+")


def _join_wrapped_row(src: List[str], i: int, line: str) -> Tuple[str, int]:
    """An nvidia-smi table row wrapped onto the next line(s) by a terminal or a mail client: the pieces after the
    first do not start with a border but the last one ends with one. (The row joined, the index of the line after
    it); the line as it is where it is no wrapped row (`i`: the index of the line after it)."""
    stripped = line.strip()
    if not _is_table_line(stripped) or len(stripped) <= 1:
        return line, i
    joined = line
    ahead = i
    while ahead < len(src) and ahead - i < 3:
        cont = src[ahead]
        cs = cont.strip()
        if not cs or _is_table_line(cs) or len(cont) > MAX_LINE:
            break
        if joined.rstrip()[-1:] in ("|", "+") and cs[-1] not in "|+":
            break  # a complete row followed by other text
        joined = joined + cont
        ahead += 1
        if cs[-1] in "|+":
            return joined, ahead
    return line, i


def _is_prompt(line: str) -> bool:
    """A shell prompt line (`$ nvidia-smi`, `user@host:~$ …`, `PS C:\\> …`)."""
    ls = line.lstrip(" \t")
    return bool(ls) and (ls[0] in "$#%([" or ls[1:3] == ":\\" or ls.startswith("PS ") or "@" in ls[:140]) \
        and _PROMPT.match(ls) is not None


def _dedent(lines: List[str]) -> List[str]:
    """The lines without the indentation common to the non-blank ones."""
    indent: Optional[int] = None
    for line in lines:
        if line:
            k = len(line) - len(line.lstrip(" "))
            if indent is None or k < indent:
                indent = k
                if k == 0:
                    break
    return [line[indent:] for line in lines] if indent else lines


def normalize(raw: Union[str, bytes, None]) -> Lines:
    text = clean_text(raw)
    src = text.split("\n")
    lines: List[str] = []
    nos: List[int] = []
    i = 0
    while i < len(src):
        line = src[i][:MAX_LINE]
        no = i + 1
        if "\t" in line:
            line = line.expandtabs(4)
        line, i = _join_wrapped_row(src, i + 1, line)
        lines.append("" if _is_prompt(line) else line.rstrip())
        nos.append(no)
    return Lines(_dedent(lines), nos, text)
