"""Secrets never leave gpudoctor: one rule, applied where text leaves the program.

What counts as a secret:
- the value of a variable or key whose name looks secret (`SECRET_NAME`: TOKEN, KEY, SECRET, PASSWORD, …);
- the credentials of a URL, whatever the password holds (`https://me:pa/ss@host`, `https://me:p@ss@host`), and of
  `user:pass@host` without a scheme.

Where it is applied: a report before any renderer sees it (`redact_data`: findings' messages and evidence, facts,
conflicts — so every format, Prometheus labels included), a snapshot as it is written, and every line the CLI
prints on stdout or stderr or writes to `--output` (`redact_text`, `RedactingStream`). The secret values seen in
facts are remembered (`remember_facts`), so a value is hidden even where a message quotes it far from its name.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import re
from collections.abc import Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Set, Tuple

from gpudoctor.errors import InputError

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
MIN_REMEMBERED = 6  # shorter values (`1`, `false`) under secret-looking names are not hunted through every line

# Every pattern below is linear in the text: each quantifier that could run on is bounded or possessive, and each
# pattern starts only at the beginning of a run of its first characters (a 15 MB token is scanned a few times, not
# once per character).
# URL credentials are found word by word (a word ends at whitespace), each word scanned a fixed number of times:
# scheme://user[:password]@host, and user:password@host without a scheme (pip's --index-url pasted without it, an
# `.npmrc`-style line). The password may hold '/', ':' and '@': the last '@' of the word
# followed by a host ends it.
_WORDS = re.compile(r"(\s++)")
_HOST_START = re.compile(r"[A-Za-z0-9\[]")
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://(?P<user>[^/@:'\"<>]++)(?P<sep>[@:]?)")
_BARE_USER = re.compile(r"(?<![\w/.:@%+-])[A-Za-z0-9._%+-]++:")
# NAME=value / NAME: value where NAME looks secret (a line quoted in a parse error, an export in a diff, a pasted
# HTTP header, a dict or JSON key); a quoted value (its quote perhaps escaped by repr) runs to its closing quote,
# or to the end of the line. `name: value` only for a quoted name, a NAME in upper case, one holding '_' or '-', or
# a header that is nothing else ("unknown key: offload", "KeyError: 'x'" are prose, not secrets). An HTTP
# authentication scheme before the value (`Authorization: Bearer …`, `token …`, `Basic …`) stays readable.
_VALUE = (r"(?P<value>\\?(?P<q>[\"'])(?:.*?(?<!\\)(?P=q)(?=[\s,;)\]}]|$)|.*)|[^\s'\"][^\s'\",;}]*+)")
NAMED_VALUE = re.compile(
    r"(?P<name>(?<![\w.-])-{0,2}[A-Za-z_][\w.-]*+(?=\s*=)"
    r"|(?<=[\"'])[A-Za-z_][\w.-]*+(?=[\"']\s*:)"
    r"|\b[A-Z_][A-Z0-9_]*+(?=\s*:)"
    r"|(?<![\w-])[A-Za-z][A-Za-z0-9]*+(?:[_-][A-Za-z0-9]++)++(?=\s*:)"
    r"|\b[a-z][a-z0-9]*+(?:[A-Z][a-z0-9]*+)++(?=\s*:)"
    r"|\b(?i:authorization|password|passwd|token|secret|cookie|apikey)(?=\s*:))"
    r"(?P<sep>[\"']?\s*[=:]\s*)"
    r"(?P<scheme>(?i:bearer|basic|token|digest|negotiate|ntlm|bot)\s++(?=[^\s'\"]))?" + _VALUE,
    re.MULTILINE)
# `export NAME value`, `setenv NAME value` (csh), `ENV NAME value` (a Dockerfile's legacy form): the value after a space
# `--hf-token VALUE`, `-api-key VALUE` (a command-line option and its value), and `AWS_SECRET_ACCESS_KEY VALUE` (an
# upper-case variable, then a value holding a digit: "HF_TOKEN is not set" is prose)
SPACED_VALUE = re.compile(r"(?:\b(?:export|setenv|ENV|env)[^\S\n]++(?P<name>[A-Za-z_][A-Za-z0-9_]*+)"
                          r"|(?<![\w-])(?P<option>--?[A-Za-z][\w.-]*+)"
                          r"|\b(?P<upper>[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)++)(?=[^\S\n]++[^\s'\"=:]*\d))"
                          r"(?P<sep>[^\S\n]++)(?![=<-])" + _VALUE, re.MULTILINE)
# Token formats that are secrets whatever their name: Hugging Face user access tokens (hf_…, huggingface.co/docs/hub/
# security-tokens), GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_: github.blog "Behind GitHub's new
# authentication token formats"), GitLab personal access tokens (glpat-), Slack tokens (xoxb-, xoxp-, …), AWS access
# key IDs (AKIA…), OpenAI-style secret keys (sk-…) and JSON Web Tokens (eyJ….eyJ….…).
# A token glued to a word by '-' or '_' (`node-AKIA…`, `x_sk-…`) is one too; each shape either stops at the end of
# its characters or fails only within a few of them, so glued starts cost no rescans (JSON Web Tokens, which can
# fail far from their start, begin only after a space or punctuation).
TOKEN_SHAPES = re.compile(r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{20,}+|gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_\w{20,}+"
                          r"|glpat-[\w-]{20,}+|xox[abposr]-[\w-]{10,}+|AKIA[0-9A-Z]{16}|sk-[\w-]{20,}+)"
                          r"|(?<![\w-])eyJ[\w-]{8,}+\.eyJ[\w-]{8,}+\.[\w-]++")
# The same shapes, and a URL's password, cut short by another tool or a log's width ("a token cut short is still a
# token"): a known prefix and a few characters, or `scheme://user:` and what follows, running into `…` or `...`.
CUT_TOKEN = re.compile(r"(?<![\w-])(?:hf_|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|AKIA|sk-|eyJ)[\w-]{3,}+"
                       r"(?=…|\.\.\.)")
CUT_URL = re.compile(r"(?<![A-Za-z0-9+.-])(?P<head>[A-Za-z][A-Za-z0-9+.-]*+://[^/@:\s'\"<>]++:)[^\s@/'\"<>]*?"
                     r"(?=…|\.\.\.)")

# A tokenizer, and token counts in lower-case ML output (`tokens_per_s`, `max_new_tokens`), are not secrets;
# `HF_TOKENS` is.
_ML_WORDS = re.compile(r"(?i:tokeniz)|tokens")

_known: set = set()
_done: Dict[str, str] = {}  # redact_text's answers while _known stays as it is (what a fleet's nodes share, written
_DONE_MOST, _DONE_LONGEST = 512, 1 << 16  # again for every node): a few, of texts not too long


@contextmanager
def remembering() -> Iterator[None]:
    """The secrets remembered inside are forgotten at its end (one CLI command: another command's secrets, or
    ordinary text a previous one mistook for a secret, never redact this one's output)."""
    saved = set(_known)
    try:
        yield
    finally:
        _known.clear()
        _known.update(saved)
        _done.clear()


@lru_cache(maxsize=8192)  # the same keys come back in every record of a fleet, a snapshot, a report
def is_secret_name(name: str) -> bool:
    """`HF_TOKEN`, `api_key`, `WANDB_API_KEY`: yes. A bare `key`/`keys` names a mapping's key (a DeepSpeed config
    key in a finding's evidence, a duplicated key), not a secret; an upper-case `KEY` variable is one."""
    return bool(SECRET_NAME.search(_ML_WORDS.sub("", name))) and name not in ("key", "keys", "Key", "Keys")


def remember(value: Any) -> None:
    """Hide this value wherever it appears in output from now on."""
    if isinstance(value, str) and len(value.strip()) >= MIN_REMEMBERED and value != REDACTED:
        if value not in _known:
            _done.clear()
        _known.add(value)
        _known.add(base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii"))
        for line in value.splitlines() if "\n" in value or "\r" in value else ():
            remember(line)  # output is redacted line by line: each line of a multi-line secret on its own


def remember_env(environ: Mapping[str, str]) -> None:
    for name, value in environ.items():
        if is_secret_name(name):
            remember(value)


def _value(node: Mapping, key: str) -> Any:
    """The value under `key`, or None: any object's keys are data to this walk, a rule's fact record's too (whose
    reads gpudoctor.facts.contract checks in tests)."""
    return dict.get(node, key) if isinstance(node, dict) else node.get(key)


def _secret_record(node: Mapping) -> bool:
    name = _value(node, "name")
    return isinstance(name, str) and is_secret_name(name)


def _secret_slot(key: Any, record_of_secret: bool) -> bool:
    """A string under this key holds a secret: the key looks secret, or it is the `value` of a secret's record."""
    return isinstance(key, str) and (is_secret_name(key) or (record_of_secret and key == "value"))


def _remember_moved(node: Any) -> None:
    """A fix's env change that moves a secret's value under another name (`set: {NCCL_IB_PKEY: …}`, `unset:
    [NCCL_IB_TOKEN]`): the value stays a secret under its new name."""
    get = (lambda key: _value(node, key)) if isinstance(node, Mapping) else lambda key: getattr(node, key, None)
    unset, values = get("unset"), get("set")
    if (isinstance(unset, (list, tuple)) and isinstance(values, Mapping)
            and any(isinstance(name, str) and is_secret_name(name) for name in unset)):
        for value in values.values():
            remember(value)


def remember_facts(node: Any, record_of_secret: bool = False, walked: Optional[set] = None) -> None:
    """Remember every string under a secret-looking key, and the `value` of a record about a secret variable
    (`env_sources["HF_TOKEN"]`, `{"name": "HF_TOKEN", "value": …}`) — not its path or context — and a secret a
    fix renames. Dataclasses (a Report, a fleet report) are walked field by field; a container met again (what
    identical fleet nodes share) is walked once."""
    if type(node) in _LEAVES:  # nothing to walk: the common case, decided without an isinstance of an ABC
        return
    walked = set() if walked is None else walked
    fields = _dataclass_fields(node)
    mapping = _is_mapping(node)
    if not (mapping or fields is not None or isinstance(node, (list, tuple))) or (id(node), record_of_secret) in walked:
        return
    walked.add((id(node), record_of_secret))
    if mapping:
        _remember_mapping(node, record_of_secret, walked)
    elif isinstance(node, (list, tuple)):
        for item in node:
            if type(item) not in _LEAVES and (id(item), record_of_secret) not in walked:
                remember_facts(item, record_of_secret, walked)
    elif fields is not None:
        _remember_moved(node)
        for name in fields[0]:
            value = getattr(node, name)
            if type(value) not in _LEAVES:
                remember_facts(value, False, walked)


def _remember_mapping(node: Mapping, record_of_secret: bool, walked: set) -> None:
    _remember_moved(node)
    record_of_secret = record_of_secret or _secret_record(node)
    for key, value in node.items():
        if isinstance(value, str):
            if _secret_slot(key, record_of_secret):
                remember(value)
        elif type(value) not in _LEAVES:
            remember_facts(value, record_of_secret or _secret_slot(key, False), walked)


_LEAVES = frozenset((str, int, float, bool, type(None)))  # values that hold no other value (exactly these types)
_FIELDS: dict = {}


def _is_mapping(node: Any) -> bool:
    return type(node) is dict or isinstance(node, Mapping)


def _dataclass_fields(node: Any) -> Optional[tuple]:
    """(every field's name, the names of those `__init__` takes) of a dataclass instance, else None (a class too:
    `dataclasses.is_dataclass` of its type is false); computed once per type."""
    kind = type(node)
    if kind not in _FIELDS:
        fields = dataclasses.fields(kind) if dataclasses.is_dataclass(kind) else None
        _FIELDS[kind] = None if fields is None else (tuple(f.name for f in fields),
                                                     tuple(f.name for f in fields if f.init))
    return _FIELDS[kind]


def _named(match: re.Match) -> str:
    groups = match.groupdict()
    name = groups.get("name") or groups.get("option") or groups.get("upper") or ""
    if not is_secret_name(name.lstrip("-")) or match.group("value") in (REDACTED, f'"{REDACTED}"', "[", "{"):
        return match.group(0)  # hidden already, or a list or object that opens here (its items are lines of their own)
    # a bare value after a quoted name (`"api_key": 12345678`) becomes a quoted one: JSON stays JSON
    hidden = f'"{REDACTED}"' if match.group("sep")[:1] in "\"'" and not match.group("q") else REDACTED
    return f"{name}{match.group('sep')}{groups.get('scheme') or ''}{hidden}"


# Each pattern runs only on the lines holding one of its markers (ASCII, lower case): a long log, or binary noise,
# costs a few substring searches per megabyte and a pattern search of the few lines that may hold a secret.
_SECRET_WORDS = (b"token", b"key", b"secret", b"passw", b"credential", b"auth", b"cookie", b"session")
_TOKEN_PREFIXES = (b"hf_", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"glpat-", b"xox", b"akia",
                   b"sk-", b"eyj")
_PASSES = (
    ((b"@",), lambda text: "".join(_url_credentials(word) if "@" in word and ":" in word else word
                                   for word in _WORDS.split(text))),
    (_TOKEN_PREFIXES, lambda text: CUT_TOKEN.sub(REDACTED, TOKEN_SHAPES.sub(REDACTED, text))),
    ((b"://",), lambda text: CUT_URL.sub(lambda m: m.group("head") + REDACTED, text)),
    (_SECRET_WORDS, lambda text: SPACED_VALUE.sub(_named, NAMED_VALUE.sub(_named, text))),
)
_DENSE = 20000  # lines with a marker beyond which one pass over the whole text is cheaper than line by line


def _url_credentials(word: str) -> str:
    """One word with the credentials of its URL (or user:password@host) hidden."""
    at = word.rfind("@")
    while at >= 0 and not _HOST_START.match(word, at + 1):
        at = word.rfind("@", 0, at)
    if at < 0 or word.endswith(REDACTED, 0, at):  # none, or hidden already
        return word
    parts, done = [], 0
    for url in _SCHEME.finditer(word, 0, at + 1):
        if url.group("sep") == ":":  # a password: it runs to the last '@'
            parts += [word[done:url.start("user")], REDACTED]
            done = at
            break
        if url.group("sep") == "@" and _HOST_START.match(word, url.end()):
            parts += [word[done:url.start("user")], REDACTED]
            done = url.end() - 1
    if parts:
        return "".join(parts) + word[done:]
    bare = _BARE_USER.search(word, 0, at)
    return word[:bare.start()] + REDACTED + word[at:] if bare else word


def _by_line(text, fold, newline, markers, redact):
    """`text` with `redact` applied to each line whose folded form (`fold(text)`: same length, ASCII lower case)
    holds one of the markers; the other lines are left untouched."""
    folded = fold(text)
    spans: Set[Tuple[int, int]] = set()  # (start, end) of each line to redact
    for marker in markers:
        at = folded.find(marker)
        while at >= 0:
            if len(spans) > _DENSE:
                return redact(text)
            start, end = text.rfind(newline, 0, at) + 1, text.find(newline, at)
            end = len(text) if end < 0 else end
            spans.add((start, end))
            at = folded.find(marker, end)
    parts, done = [], 0
    for start, end in sorted(spans):
        parts += [text[done:start], redact(text[start:end])]
        done = end
    return text[:0].join(parts + [text[done:]]) if spans else text


def redact_text(text: str) -> str:
    """The text with every remembered secret, URL credential, known token format and secret-looking NAME=value
    hidden. Linear in the length of the text; a text met again since the last secret was remembered costs a
    look-up."""
    done = _done.get(text)
    if done is None:
        done = _redacted_text(text)
        if len(text) <= _DONE_LONGEST:
            if len(_done) >= _DONE_MOST:
                _done.clear()
            _done[text] = done
    return done


def _redacted_text(text: str) -> str:
    for value in sorted(_known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    fold = _folding(lambda t: t.encode("ascii", "replace").lower())
    for markers, redact in _PASSES:
        text = _by_line(text, fold, "\n", markers, redact)
    return text


def _folding(fold: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """`fold`, keeping its last answer: the passes fold one text (57 MB of a 10,000-node fleet's JSON) once, again
    only after a pass changed it."""
    last: list = [None, b""]

    def folded(text):
        if text is not last[0]:
            last[0], last[1] = text, fold(text)
        return last[1]

    return folded


def cut(text: str, limit: int, mark: str = "") -> str:
    """`text` shortened to `limit` characters (`mark` where it was cut) — redacted first: cut first, a token or a
    URL's password would come out in part, too short for any pattern to know it."""
    text = redact_text(text)
    return text if len(text) <= limit else text[:max(0, limit - len(mark))] + mark


def redact_bytes(data: bytes) -> bytes:
    """`redact_text` for UTF-8 bytes (a pasted log as it is read): lines without a marker are never decoded."""
    for value in sorted(_known, key=len, reverse=True):
        raw = value.encode("utf-8", "surrogateescape")
        if raw in data:
            data = data.replace(raw, REDACTED.encode())
    fold = _folding(bytes.lower)
    for markers, redact in _PASSES:
        data = _by_line(data, fold, b"\n", markers, lambda line, redact=redact: redact(
            line.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape"))
    return data


def redact_data(node: Any) -> Any:
    """A copy of a value (dicts, lists, frozen dataclasses such as a Report) with every secret hidden: strings in
    secret slots replaced whole, every other string through `redact_text` (after remembering the secrets it holds).
    A string, or a container met again (the reports that identical fleet nodes share), is redacted once."""
    remember_facts(node)
    return _redacted(node, False, {})


def _redacted(node: Any, record_of_secret: bool, memo: dict) -> Any:
    if type(node) in _SCALARS or node is None or isinstance(node, (enum.Enum, bool, int, float)):
        return node
    key = (node if isinstance(node, str) else id(node), record_of_secret)
    if key in memo:
        return memo[key][0]
    fields = None
    if isinstance(node, str):
        done: Any = redact_text(node)
    elif _is_mapping(node):
        secret = record_of_secret or _secret_record(node)
        done = {name: (REDACTED if isinstance(value, str) and _secret_slot(name, secret)
                       else _redacted(value, secret or _secret_slot(name, False), memo))
                for name, value in node.items()}
    elif isinstance(node, (list, tuple)):
        done = type(node)(_redacted(item, record_of_secret, memo) for item in node)
    else:
        fields = _dataclass_fields(node)
        if fields is None:
            return node
        done = type(node)(**{name: _redacted(getattr(node, name), False, memo) for name in fields[1]})  # replace()
    memo[key] = (done, node)  # the node is kept alive with its copy: its id is never reused within the walk
    return done


_SCALARS = frozenset((int, float, bool))


class UnwritableStream(InputError):
    """Standard output or error cannot be written (a full disk, /dev/full, a closed descriptor): one line, exit 2."""


class RedactingStream:
    """A text stream that redacts whole lines before they reach the real one (a secret is never split across two
    writes of a line). Everything else (isatty, fileno, encoding) is the real stream's."""

    def __init__(self, stream, name: str = "output"):
        self._stream = stream
        self._pending = ""
        self._name = name

    def _passed_on(self, call, *args) -> None:
        """The real stream's write or flush; a stream that cannot be written (a full disk, /dev/full, a closed or
        broken descriptor) is an UnwritableStream naming it. A closed pipe (`| head`) stays a BrokenPipeError."""
        try:
            call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise UnwritableStream(f"cannot write {self._name}: {exc.strerror or exc}") from None

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            lines, _, self._pending = self._pending.rpartition("\n")
            self._passed_on(self._stream.write, redact_text(lines + "\n"))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._passed_on(self._stream.write, redact_text(pending))
        self._passed_on(self._stream.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
