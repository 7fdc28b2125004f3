"""The text around the line the log reader (gpudoctor.ingest.logs) is reading: the line below it, the line above
it, the text above it (a traceback's frames over its error line), across the chunks of one file. Only what a reader
asks for is decoded, and redacted where it is read for its words."""

from __future__ import annotations

from typing import Dict, Tuple

from gpudoctor.redact import redact_bytes

MAX_LINE_CHARS = 2000
LOOK_BACK_BYTES = 32 * 1024  # a traceback's frames above its error line


class Window:
    """Where the line being read starts in its chunk (`at`: the file, the chunk, the offset), and the end of each
    file's chunks read so far."""

    def __init__(self) -> None:
        self.tails: Dict[str, bytes] = {}  # file → its last LOOK_BACK_BYTES read (the chunks before this one)
        self.at: Tuple[str, bytes, int] = ("", b"", 0)  # set by the log reader for each line it reads

    def keep_tail(self, name: str, data: bytes) -> None:
        """After a chunk of `name`: keep its end for the chunk after it."""
        self.tails[name] = (self.tails.get(name, b"") + data[-LOOK_BACK_BYTES:])[-LOOK_BACK_BYTES:]

    def look_back(self) -> str:
        """The text just above the line being read (up to LOOK_BACK_BYTES, across chunks of the same file)."""
        name, data, start = self.at
        window = data[max(0, start - LOOK_BACK_BYTES):start]
        if len(window) < LOOK_BACK_BYTES:
            window = self.tails.get(name, b"")[-(LOOK_BACK_BYTES - len(window)):] + window
        if len(window) >= LOOK_BACK_BYTES:  # a line cut at the start could hold a secret without its name
            window = window[window.find(b"\n") + 1:] if b"\n" in window else b""
        return redact_bytes(window).decode("utf-8", errors="replace")

    def raw_above(self, size: int) -> bytes:
        """Up to `size` bytes of the chunk above the line being read, as they are (not redacted: for timestamps)."""
        _, data, start = self.at
        return data[max(0, start - size):start]

    def next_line(self) -> str:
        """The line after the one being read (within the chunk)."""
        _, data, start = self.at
        end = data.find(b"\n", start)
        if end < 0:
            return ""
        after = data.find(b"\n", end + 1)
        return data[end + 1:after if after >= 0 else len(data)][:MAX_LINE_CHARS].decode("utf-8", errors="replace")

    def ends_chunk(self) -> bool:
        """Whether the line being read is its chunk's last (the line below it starts the next chunk)."""
        _, data, start = self.at
        end = data.find(b"\n", start)
        return end < 0 or end + 1 == len(data)

    def previous_line(self) -> str:
        """The line before the one being read (the last of the previous chunk of the same file at a chunk's start),
        as `next_line` reads the one after it: for a message a line break cut (the line read is the evidence)."""
        name, data, start = self.at
        if start == 0:
            data, start = self.tails.get(name, b""), len(self.tails.get(name, b""))
            if data.endswith(b"\n"):
                data, start = data + b"\n", start + 1
        if start == 0:
            return ""
        first = data.rfind(b"\n", 0, start - 1) + 1
        return data[first:start - 1][:MAX_LINE_CHARS].decode("utf-8", errors="replace")
