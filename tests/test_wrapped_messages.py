"""Messages broken over lines: terminals and issue trackers wrap long lines, often inside a message. Every entry of
the atlas is read across such a break: its sample with the trigger's line cut in two, at a space in the middle of the
trigger (an issue tracker) or inside a word of a long line (a terminal), still fires its rule; a break never makes
two unrelated lines into a message. (A break inside the anchor itself, the few bytes the log reader's prefilter
searches for, is not read: finding those would cost a second scan of every log.)"""

import io

import pytest

from gpudoctor.api import evaluate
from gpudoctor.ingest import atlas
from gpudoctor.ingest.source import snapshot_from_reports


def fired(text: str) -> set:
    return {f.rule for f in evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode()))).findings}


def _spans(line: str, word: str):
    start = line.find(word)
    while start >= 0:
        yield start
        start = line.find(word, start + 1)


def cut(message, sample, at_space: bool):
    """(the sample with the line holding the trigger broken inside the trigger, the first half of that line); None
    where it cannot be broken so."""
    lines = sample.text.splitlines()
    index = next((i for i, line in enumerate(lines) if message.trigger in line and message.anchor in line), None)
    if index is None:
        return None
    line = lines[index]
    start = line.index(message.trigger)
    anchored = {pos for found in _spans(line, message.anchor) for pos in range(found + 1, found + len(message.anchor))}
    spaces = [start + i for i, char in enumerate(message.trigger)
              if char == " " and 0 < i < len(message.trigger) - 1 and start + i not in anchored]
    if at_space:
        if not spaces:
            return None
        where = min(spaces, key=lambda pos: abs(pos - start - len(message.trigger) // 2))
        head, tail = line[:where], "    " + line[where + 1:]
    else:
        inside = [start + i for i in range(1, len(message.trigger)) if start + i not in anchored
                  and line[start + i - 1] != " " and line[start + i] != " "
                  and len(line[:start + i].strip()) >= atlas.WRAP_WIDTH]
        if not inside:
            return None
        where = min(inside, key=lambda pos: abs(pos - start - len(message.trigger) // 2))
        head, tail = line[:where], line[where:]
    return "\n".join(lines[:index] + [head, tail] + lines[index + 1:]), head


def read_alone(message, sample, at_space: bool) -> bool:
    """Whether the first half of the cut line is already a message by itself (a shorter entry's trigger stands in
    it): the reader takes the line as that message, its first choice, and never joins it."""
    return bool(fired(cut(message, sample, at_space)[1]) - {"GD003"})


CASES = [pytest.param(m, m.samples[0], space, id=f"{m.id}-{'space' if space else 'word'}")
         for m in atlas.messages() for space in (True, False)
         if m.samples and cut(m, m.samples[0], space) and not read_alone(m, m.samples[0], space)]


def test_most_entries_are_tried():
    assert len({case.values[0].id for case in CASES}) >= 0.75 * len(atlas.messages())


@pytest.mark.parametrize("message, sample, at_space", CASES)
def test_a_message_cut_by_a_line_break_still_fires_its_rule(message, sample, at_space):
    assert message.rule in fired(cut(message, sample, at_space)[0])


@pytest.mark.parametrize("text", [
    "RuntimeError: DataLoader worker (pid 1234) is killed by\nsignal: Segmentation fault.",  # not Bus error
    "ERROR: Failed building\nwheel for numpy",
    "Installed CUDA version 12.1 does not match\nthe weather today",
])
def test_two_lines_that_only_look_joined_fire_nothing(text):
    assert not fired(text) - {"GD003"}
