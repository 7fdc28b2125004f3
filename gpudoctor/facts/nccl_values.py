"""Value grammars of NCCL, PyTorch and libfabric variables: what GD402 finds wrong in a value, and which network
interfaces an NCCL_SOCKET_IFNAME value selects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from gpudoctor.facts.nccl_settings import FALSE_WORDS, TRUE_WORDS, knowledge, meta, spec
from gpudoctor.knowledge import version

# --- C-like integer parsing (NCCL reads integers with strtoll(base 0)) ---------------------------------------

_C_INT = re.compile(r"^[ \t\n\r\f\v]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def c_strtoll(text: str) -> Tuple[Optional[int], bool]:
    """(value NCCL reads, whether the whole text was a number). (None, False) when no digits at all."""
    match = _C_INT.match(text)
    if not match:
        return None, False
    digits = match.group(2)
    number = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if digits.startswith("0") else \
        int(digits)
    number = -number if match.group(1) == "-" else number
    return number, text[match.end():].strip() == ""


# --- GD402 value grammars -----------------------------------------------------------------------------------

@dataclass
class Problem:
    """What is wrong with a value, and the value that fixes it where one follows."""

    message: str
    fixed: Optional[str] = None  # a corrected value, when one follows from the mistake
    since: Optional[str] = None  # version-dependent: the problem exists from this NCCL release on
    before: Optional[str] = None  # version-dependent: the problem exists in releases older than this one


def _bool_fix(value: str) -> Optional[str]:
    lowered = value.strip().lower()
    return "1" if lowered in TRUE_WORDS else "0" if lowered in FALSE_WORDS else None


def _check_int(item: dict, value: str, reader: str) -> List[Problem]:
    number, whole = c_strtoll(value)
    if number is None:
        return [Problem(f"is not an integer; {reader} reads it as 0" if reader.startswith("NCCL") else
                        f"is not an integer; {reader} ignores it", _bool_fix(value))]
    if not whole:
        return [Problem(f"is not a plain integer; {reader} reads only the leading number, {number} "
                        "(no unit suffixes or decimals)", str(number))]
    low, high = item.get("min"), item.get("max")
    if (low is not None and number < low) or (high is not None and number > high):
        span = f"{low}..{high}" if low is not None and high is not None else f">= {low}" if low is not None \
            else f"<= {high}"
        return [Problem(f"is outside the accepted range {span}")]
    return []


def _check_bool(item: dict, value: str) -> List[Problem]:
    number, whole = c_strtoll(value)
    if number is None:
        fixed = _bool_fix(value)
        hint = f" (write {fixed})" if fixed else ""
        return [Problem(f"is not 0 or 1: NCCL reads integers, so {value!r} counts as 0{hint}", fixed)]
    if not whole:
        return [Problem(f"is not a plain integer; NCCL reads it as {number}", str(number))]
    if number not in (0, 1):
        return [Problem("is not one of the documented values 0 and 1")]
    return []


def _check_enum(item: dict, value: str) -> List[Problem]:
    values = [str(v) for v in item.get("values", [])]
    if values and all(v.lstrip("-").isdigit() for v in values):
        number, whole = c_strtoll(value)
        if number is not None and whole and str(number) in values:
            return []
        return [Problem(f"is not one of {', '.join(values)}")]
    stripped = value.strip()
    if item.get("case_sensitive"):
        if stripped in values:
            return [] if stripped == value else [Problem("has surrounding spaces", stripped)]
        upper = next((v for v in values if v.lower() == stripped.lower()), None)
        if upper:
            return [Problem(f"is compared case-sensitively: write {upper}", upper)]
        return [Problem(f"is not one of {', '.join(values)}")]
    if any(v.lower() == stripped.lower() for v in values):
        return []
    return [Problem(f"is not one of {', '.join(values)}")]


def _check_flags(item: dict, value: str) -> List[Problem]:
    delimiter = item.get("delimiter", ",")
    body = value.strip()
    body = body[1:] if body.startswith("^") else body
    tokens = [t.strip() for t in body.split(delimiter)]
    valid = {str(v).lower() for v in item.get("values", [])}
    bad = [t for t in tokens if t and t.lower() not in valid]
    if not bad:
        return []
    good = [t for t in tokens if t and t.lower() in valid]
    fixed = ("^" if value.strip().startswith("^") else "") + delimiter.join(good) if good else None
    return [Problem(f"has unknown token{'s' if len(bad) > 1 else ''} {', '.join(repr(b) for b in bad)} "
                    f"(valid: {', '.join(str(v) for v in item.get('values', []))})", fixed)]


def _check_level(item: dict, value: str) -> List[Problem]:
    values = [str(v) for v in item.get("values", [])]
    accepted = values + [str(v) for v in item.get("undocumented_values", [])]
    if value in accepted:
        return []
    if value[:1].isdigit():
        return []  # legacy integer levels (larger values clamp to SYS)
    match = next((v for v in accepted if v.lower() == value.strip().lower()), None)
    if match:
        return [Problem(f"is compared case-sensitively, so NCCL ignores it: write {match}", match)]
    return [Problem(f"is not a path level ({', '.join(values)}); NCCL ignores it")]


@dataclass
class _AlgoList:
    """NCCL_ALGO / NCCL_PROTO as src/graph/tuning.cc parseList reads them (strict since 2.24): `[^]a,b` or, per
    collective, `allreduce:a,b;broadcast:^c`. Each `segment` and `token` says its problems and what to keep."""

    name: str
    item: dict
    problems: List[Problem] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.strict = meta("nccl_strict_algo_proto") or "2.24"
        self.functions = [str(f) for f in knowledge().get("meta", {}).get("algo_functions", [])]
        self.values = [str(v) for v in self.item.get("values", [])]
        self.lowered = {v.lower(): v for v in self.values}
        self.since = {k.lower(): v for k, v in (self.item.get("value_since") or {}).items()}
        self.until = {k.lower(): v for k, v in (self.item.get("value_until") or {}).items()}
        self.floor = version(meta("nccl_floor"))
        self.what = "algorithm" if self.name == "NCCL_ALGO" else "protocol"

    def segment(self, index: int, segment: str) -> Optional[str]:
        """The segment as NCCL would keep it (its unknown tokens dropped); None when NCCL rejects all of it."""
        prefix, elements = segment.split(":", 1) if ":" in segment else (None, segment)
        if prefix is not None and prefix.strip().lower() not in [f.lower() for f in self.functions]:
            self.problems.append(Problem(f"names an unknown collective {prefix.strip()!r} (valid: "
                                         f"{', '.join(self.functions)})"))
            return None
        if prefix is None and index > 0:
            self.problems.append(Problem(f"has an entry without a `collective:` prefix after the first ({segment!r}): "
                                         "NCCL rejects it", since=self.strict))
            return None
        negate = elements.startswith("^")
        kept = [self.token(raw) for raw in (elements[1:] if negate else elements).split(",") if raw != ""]
        text = ("^" if negate else "") + ",".join(token for token in kept if token is not None)
        return f"{prefix.strip()}:{text}" if prefix is not None else text

    def token(self, raw: str) -> Optional[str]:
        """The value NCCL reads for one token; None when it is unknown."""
        token = raw.strip()
        key = token.lower()
        if key not in self.lowered:
            self.problems.append(Problem(f"has an unknown {self.what} {raw!r} (valid: {', '.join(self.values)}); "
                                         f"since NCCL {self.strict} this makes communicator initialisation fail, "
                                         "before it the token was silently ignored"))
            return None
        if raw != token:
            self.problems.append(Problem(f"has spaces around {token!r}: NCCL does not trim them, so the token is "
                                         f"unknown (init fails since NCCL {self.strict}, ignored before)"))
        since = version(self.since.get(key))
        if since is not None and not (self.floor and since <= self.floor):
            self.problems.append(Problem(f"uses {self.lowered[key]}, which NCCL accepts only since "
                                         f"{self.since[key]}", before=self.since[key]))
        if key in self.until:
            self.problems.append(Problem(f"uses {self.lowered[key]}, which NCCL accepts only up to {self.until[key]} "
                                         "(renamed CollNetDirect / CollNetChain in 2.14)",
                                         since=_next(self.until[key])))
        return self.lowered[key]


def _check_algo_proto(name: str, item: dict, value: str) -> List[Problem]:
    grammar = _AlgoList(name, item)
    segments = [s for s in value.split(";") if s != ""]
    kept = [grammar.segment(index, segment) for index, segment in enumerate(segments)]
    problems = grammar.problems
    if ";" in value or any(":" in segment for segment in segments):
        problems.append(Problem(f"uses the per-collective syntax (`collective:{grammar.what}s;...`), which NCCL "
                                f"reads only since {grammar.strict}; older NCCL ignores the whole value",
                                before=grammar.strict))
    fixed = ";".join(s for s in kept if s is not None and not s.endswith(":") and s not in ("", "^"))
    for problem in problems:
        if problem.fixed is None and fixed and fixed != value and not (problem.since or problem.before):
            problem.fixed = fixed
    return problems


def _next(release: str) -> str:
    parsed = version(release)
    return f"{parsed.major}.{parsed.minor + 1}" if parsed else release


# network interface names (IPoIB `ib0`, Ethernet, bonds, bridges) that people put where an RDMA device name belongs;
# not `ibp…`/`rocep…`, which are also what udev names RDMA devices themselves
NETDEV = re.compile(r"^(?:eth\d+|en[opsx]\w+|ib\d+|bond\d+|docker\d+|virbr\d+|lo)$")


def _check_ifname(name: str, item: dict, value: str) -> List[Problem]:
    problems = []
    if re.search(r"\s", value):
        fixed = re.sub(r"\s+", "", value)
        problems.append(Problem("contains spaces; NCCL does not trim them, so no interface matches", fixed))
    body = value.strip()
    if body.startswith("=^"):
        problems.append(Problem("starts with `=^`: the exclusion `^` must come first (`^=name`)", "^=" + body[2:]))
    if item.get("kind") == "ifname" and 0 < len(value) <= 1:
        problems.append(Problem("is one character long; NCCL ignores such a value and selects interfaces itself"))
    if item.get("kind") == "hca" and not body.startswith("^"):  # excluding an interface name excludes nothing
        netdevs = [name for name in (token.split(":")[0] for token in re.split(r"[,\s]+", body.lstrip("=")))
                   if NETDEV.match(name)]
        if netdevs:
            problems.append(Problem(
                f"names a network interface ({', '.join(netdevs[:3])}), not an RDMA device: it takes the HCA names "
                "`ibv_devices` lists (`mlx5_0`, `mlx5_0:1`), so no HCA matches and NCCL falls back to TCP sockets "
                "(\"NET/IB : No device found\")"))
    return problems


def _check_gloo(value: str) -> List[Problem]:
    if re.search(r"\s", value):
        return [Problem("contains spaces; gloo looks the names up exactly", re.sub(r"\s+", "", value))]
    return []


def _check_netdevs(value: str) -> List[Problem]:
    text = value.strip().upper()
    if text in ("AUTO", "ALL") or re.fullmatch(r"MAX:[1-9][0-9]*", text):
        return []
    return [Problem("is not AUTO, ALL or MAX:N")]


def _check_torch_bool(value: str) -> List[Problem]:
    if value.strip().lower() in ("1", "0", "true", "false"):
        return []
    return [Problem("is not 1/true or 0/false; PyTorch ignores it with a warning", _bool_fix(value))]


def _check_fi_bool(value: str) -> List[Problem]:
    if value.strip().lower() in TRUE_WORDS | FALSE_WORDS | {"1", "0"}:
        return []
    return [Problem("is not a libfabric boolean (1/0, yes/no, true/false, on/off)")]


# the kinds of value (rules/nccl_env.toml) judged by their entry alone, and those whose check needs the name too
_BY_ENTRY = {"enum": _check_enum, "flags": _check_flags, "level": _check_level}
_BY_NAME = {"algo": _check_algo_proto, "proto": _check_algo_proto, "ifname": _check_ifname, "hca": _check_ifname}
# the kinds judged by the value alone
_BY_VALUE = {"gloo_ifname": _check_gloo, "torch_bool": _check_torch_bool, "fi_bool": _check_fi_bool,
             "netdevs_policy": _check_netdevs}
_READERS = {"nccl": "NCCL", "torch": "PyTorch", "cuda": "CUDA", "libfabric": "libfabric"}  # an owner, as named


def value_problems(name: str, value: str) -> List[Problem]:
    """What is wrong with this value of a documented variable (empty: nothing)."""
    item = spec(name)
    if item is None or value is None or value == "":
        return []
    kind = item.get("kind")
    owner = item.get("owner", "nccl")
    if kind in _BY_ENTRY:
        return _BY_ENTRY[kind](item, value)
    if kind in _BY_NAME:
        return _BY_NAME[kind](name, item, value)
    if kind in _BY_VALUE:
        return _BY_VALUE[kind](value)
    if kind == "bool" and owner in ("nccl", "cuda"):
        return _check_bool(item, value)
    if kind == "int":
        return _check_int(item, value, _READERS.get(owner, owner))
    if kind == "path" and owner == "nccl" and value.startswith("~"):
        return [Problem("starts with `~`, which NCCL does not expand: use an absolute path")]
    return []


def nccl_ifname_matches(value: str, names: List[str]) -> List[str]:
    """The interface names NCCL_SOCKET_IFNAME selects among `names` (src/os/linux.cc ncclOsFindInterfaces)."""
    text = value
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    prefixes = [entry.split(":", 1)[0] for entry in text.split(",") if entry.split(":", 1)[0]]
    if not prefixes:
        return list(names)

    def matches(name: str) -> bool:
        return any(name == p if exact else name.startswith(p) for p in prefixes)

    return [name for name in names if matches(name) != exclude]
