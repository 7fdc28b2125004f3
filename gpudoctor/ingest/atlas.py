"""The atlas of messages: what torch, CUDA, NCCL, DeepSpeed, the launchers and the NVIDIA stack print about the
environment, kept as data in `rules/messages/*.toml` (one file per project; docs/messages.md is generated from them
with `python -m gpudoctor.ingest.atlas > docs/messages.md`).

Each entry names who prints the message and where, the literal `anchor` of the log reader's byte prefilter
(gpudoctor.ingest.logs.ANCHORS) that admits its line, a `trigger` literal the line must hold, a `pattern` whose named
groups are the numbers and names the message states, the `event` it proves, the `rule` it feeds, and real samples
with their public source. `facts` maps a fact path (rules/facts.toml) to the group that states it, written
`group|form` where the text needs converting (`words`: a space-separated list; `cuda_int`: CUDA's 11080 as 11.8;
`sm`: sm_120 as 12.0); `gpu.name` and `gpu.cc` are a GPU the message names and its compute capability, given to the
GPUs of that name the reports list. `fix` names the case of the rule's `docs.fixes` that remedies this message where
the rule's general fix does not. `wraps = true`: the message goes on on the next line as its program
prints it (the pattern reads the line and the one after it, joined by a space; the trigger stays on the first). Any
entry is also read across a break a terminal or an issue tracker put in it (`wrapped`): its pattern on the line and
the next one joined, and its trigger cut in two by the break. `after`: literals one of which must
stand in the text above the line (the log reader's look-back window), where only that context makes the message mean
this cause (torch missing inside pip's isolated build environment); such an entry comes before the one that reads the
line alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Optional, Pattern, Tuple

from gpudoctor.data import load_tomls, rules_dir


@dataclass(frozen=True)
class Sample:
    text: str
    source: str


@dataclass(frozen=True)
class Message:
    id: str
    project: str
    where: str
    anchor: str
    trigger: str
    pattern: Pattern[str]
    event: str
    rule: str
    proves: str
    severity: Optional[str]
    fix: str  # a case of the rule's `docs.fixes` where the rule's general fix is not this message's remedy
    facts: Tuple[Tuple[str, str], ...]
    samples: Tuple[Sample, ...]
    wraps: bool = False
    after: Tuple[str, ...] = ()  # one of these must stand above the line


@dataclass(frozen=True)
class NearMiss:
    text: str
    why: str
    project: str


def _message(project: str, raw: dict) -> Message:
    return Message(
        id=raw["id"], project=project, where=raw["where"], anchor=raw["anchor"], trigger=raw["trigger"],
        pattern=re.compile(raw["pattern"]), event=raw["event"], rule=raw["rule"], proves=raw["proves"],
        severity=raw.get("severity"), fix=raw.get("fix", ""), facts=tuple(sorted(raw.get("facts", {}).items())),
        samples=tuple(Sample(s["text"], s["source"]) for s in raw.get("sample", ())), wraps=raw.get("wraps", False),
        after=tuple(raw.get("after", ())))


@lru_cache(maxsize=1)
def _load() -> Tuple[Tuple[Message, ...], Tuple[NearMiss, ...]]:
    messages: List[Message] = []
    near: List[NearMiss] = []
    for data in load_tomls(sorted((rules_dir() / "messages").glob("*.toml"))):
        project = data["project"]
        messages.extend(_message(project, raw) for raw in data.get("message", ()))
        near.extend(NearMiss(raw["text"], raw["why"], project) for raw in data.get("near_miss", ()))
    return tuple(messages), tuple(near)


def messages() -> Tuple[Message, ...]:
    return _load()[0]


def near_misses() -> Tuple[NearMiss, ...]:
    return _load()[1]


@lru_cache(maxsize=1)
def by_anchor() -> Dict[str, Tuple[Message, ...]]:
    """The entries under the anchor that admits them, in the atlas's order."""
    grouped: Dict[str, List[Message]] = {}
    for message in messages():
        grouped.setdefault(message.anchor, []).append(message)
    return {anchor: tuple(found) for anchor, found in grouped.items()}


@lru_cache(maxsize=1)
def _gates() -> Dict[str, Pattern[str]]:
    """Per anchor, one search for any of its entries' triggers: a line that holds none (most lines an anchor admits,
    such as NCCL's INFO lines) costs one regex search, however many entries the atlas has."""
    return {anchor: re.compile(any_of(m.trigger for m in found)) for anchor, found in by_anchor().items()}


def any_of(words: Iterable[str]) -> str:
    """A regex matching any of the literal `words`, factored by common prefix (a trie): the search looks at each
    character of the text once per branch it enters, not once per word."""
    root: Dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: Dict[str, dict]) -> str:
        alternatives = [re.escape(char) + branch(child) for char, child in sorted(node.items()) if char]
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        return f"(?:{body})?" if "" in node else body

    return branch(root)


def match(line: str, anchors: Tuple[str, ...], following: Callable[[], str] = str, preceding: Callable[[], str] = str,
          previous: Callable[[], str] = str) -> Optional[Tuple[Message, re.Match[str]]]:
    """The first entry, among those of the anchors found in the line, whose trigger and pattern match it
    (`following()`: the next line, read where the message goes on past the line; `preceding()`: the text above
    the line, read by the entries that name what must stand there; `previous()`: the line just above). A message a
    terminal or an issue tracker broke over lines is read across the break (`wrapped`)."""
    table, gates = by_anchor(), _gates()
    above: List[str] = []

    def placed(message: Message) -> bool:
        if not message.after:
            return True
        if not above:
            above.append(preceding())
        return any(word in above[0] for word in message.after)

    for anchor in anchors:
        if anchor not in gates or not gates[anchor].search(line):
            continue
        for message in table[anchor]:
            if message.trigger in line and placed(message):
                found = message.pattern.search(f"{line} {following().strip()}" if message.wraps else line)
                if found is None and not message.wraps:  # the rest of the message on the next line
                    found = message.pattern.search(f"{line} {following().strip()}")
                if found:
                    return message, found
    if line.islower():  # a message retyped or pasted in lower case ("valueerror: bfloat16 is only supported …")
        for anchor in anchors:
            for message, trigger, pattern in _folded().get(anchor, ()):
                if trigger in line and placed(message):
                    found = pattern.search(f"{line} {following().strip().lower()}" if message.wraps else line)
                    if found:
                        return message, found
    return wrapped(line, anchors, following, previous, placed)


WRAP_WIDTH = 40  # a line this long (indentation aside) may have been cut by a terminal inside a word


@lru_cache(maxsize=1)
def _longest_trigger() -> int:
    return max(len(message.trigger) for message in messages())


def wrapped(line: str, anchors: Tuple[str, ...], following: Callable[[], str], previous: Callable[[], str],
            placed: Callable[[Message], bool]) -> Optional[Tuple[Message, re.Match[str]]]:
    """A message whose trigger a line break cut in two (`… is killed by signal: Bus` / `error. It is possible …`):
    the line joined with the one above or below it, at a space or (a long line a terminal cut) at nothing. Only the
    seam is searched first, a few dozen characters, so reading every admitted line this way stays cheap."""
    table, gates, reach = by_anchor(), _gates(), _longest_trigger()
    for before, after, own in ((previous(), line, False), (line, following(), True)):
        before, after = before.strip(), after.strip()
        if not before or not after or before[:4] == after[:4]:
            continue  # a line that starts as the one before it does is a record of its own (NCCL's host:pid prefix)
        for glue in (" ", "") if len(before) >= WRAP_WIDTH else (" ",):
            seam = before[-reach:] + glue + after[:reach]
            for anchor in anchors:
                if anchor not in gates or (not own and anchor in before) or not gates[anchor].search(seam):
                    continue  # the line above holds the anchor too: its own reading joined it with this one
                joined = before + glue + after
                for message in table[anchor]:
                    if message.trigger in seam and message.trigger not in before and message.trigger not in after \
                            and placed(message):
                        found = message.pattern.search(joined)
                        if found:
                            return message, found
    return None


@lru_cache(maxsize=1)
def _folded() -> Dict[str, Tuple[Tuple[Message, str, Pattern[str]], ...]]:
    """Per anchor, its entries with the trigger in lower case and the pattern ignoring case."""
    return {anchor: tuple((m, m.trigger.lower(), re.compile(m.pattern.pattern, re.IGNORECASE)) for m in found)
            for anchor, found in by_anchor().items()}


def _cuda_int(text: str) -> str:
    number = int(text)
    return f"{number // 1000}.{number % 1000 // 10}"


def _sm(text: str) -> str:
    digits = text.split("_", 1)[-1]
    return f"{digits[:-1]}.{digits[-1]}"


_FORMS: Dict[str, Callable[[str], Any]] = {"words": str.split, "cuda_int": _cuda_int, "sm": _sm}


def fact_values(message: Message, found: re.Match[str]) -> Dict[str, Any]:
    """fact path → the value the message states (only the groups that matched)."""
    groups = found.groupdict()
    values = {}
    for path, spec in message.facts:
        group, _, form = spec.partition("|")
        if groups.get(group) is not None:
            values[path] = _FORMS[form](groups[group]) if form else groups[group]
    return values


def render() -> str:
    """docs/messages.md: the messages gpudoctor knows, per project."""
    out = ["# The messages gpudoctor knows", "",
           "Generated from `rules/messages/*.toml` by `python -m gpudoctor.ingest.atlas > docs/messages.md`. "
           "`gpudoctor check --from` reads each of these anywhere in a pasted text or a log; a message that states a "
           "fact (a GPU, its architecture, a CUDA version) gives it to the rules, and the line is the evidence. "
           f"{len(messages())} messages from {len({m.project for m in messages()})} projects.", ""]
    projects: Dict[str, List[Message]] = {}
    for message in messages():
        projects.setdefault(message.project, []).append(message)
    for project, found in projects.items():
        out += [f"## {project}", "", "| message | printed by | proves | rule | sample |",
                "| --- | --- | --- | --- | --- |"]
        for m in found:
            first = m.samples[0] if m.samples else None
            line = next((ln.strip() for ln in first.text.splitlines() if m.trigger in ln), "") if first else ""
            line = (line[:117] + "...") if len(line) > 120 else line
            cell = f"[{_cell(line)}]({first.source})" if first else ""
            out.append(f"| `{_cell(m.trigger)}` | {_cell(m.where)} | {_cell(m.proves)} | {m.rule} | {cell} |")
        out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


if __name__ == "__main__":
    print(render(), end="")
