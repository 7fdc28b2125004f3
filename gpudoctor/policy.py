"""Site policies (`--policy FILE`): rules a site declares in TOML over snapshot facts, compiled to `Rule` objects.

The language is closed and data-only (no code is ever evaluated): a condition is a fact expression, one operator
from `OPERATORS` and a literal value, combined with `all` / `any` / `not`. A rule `require`s a condition (it fires
when the condition is false) or `forbid`s one (it fires when the condition is true). Everything is validated when
the file is loaded, so a typo is a `PolicyError` (exit 2, one line naming the file and the rule), never a rule that
is silently false. A `[preflight]` table sets a site's own fractions for `gpudoctor preflight`'s verdicts (those of
rules/preflight.toml). See docs/policy.md for the format.

Three-valued logic: a fact the snapshot does not carry is unknown (the rule is reported as unknown, like any rule);
`all` is false as soon as one part is false, `any` true as soon as one part is true, otherwise unknown wins.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Tuple, overload

import regex
from packaging.version import InvalidVersion, Version

from gpudoctor import schema
from gpudoctor.catalog import Rule
from gpudoctor.data import TOMLDecodeError, loads_toml
from gpudoctor.errors import InputError
from gpudoctor.facts import MissingFact
from gpudoctor.model import Applicability, EnvChange, Severity
from gpudoctor.readers.env import is_env_name
from gpudoctor.redact import REDACTED, is_secret_name

SCHEMA = "gpudoctor.policy/1"
POLICY_ID = re.compile(r"^[A-Z]+[0-9]+$")
OPERATORS = ("eq", "ne", "lt", "le", "gt", "ge", "version_lt", "version_ge", "in", "not_in", "exists", "missing",
             "matches")
COMBINATORS = ("all", "any", "not")
QUANTIFIERS = ("all", "any")
MAX_PATTERN = 200  # characters of a `matches` regular expression
MAX_SUBJECT = 4096  # characters of a fact value `matches` looks at
MATCH_TIMEOUT = 0.5  # seconds one `matches` may take (the `regex` engine stops itself; no signal is used)
MAX_POLICY_BYTES = 2**20
MAX_DEPTH = 16  # nesting of all/any/not

RULE_KEYS = {"id", "name", "severity", "summary", "message", "require", "forbid", "fix", "docs", "host"}
FIX_KEYS = {"summary", "applicability", "env", "commands", "docs"}
DOCS_KEYS = {"what", "why", "fix", "references"}

_SEGMENT = re.compile(r"^([A-Za-z0-9_\-]+)((?:\[(?:\*|[0-9]+)\])*)$")
_INDEX = re.compile(r"\[(\*|[0-9]+)\]")
_LEN = re.compile(r"^len\((.+)\)$")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


class PolicyError(InputError):
    """A policy file that cannot be used: one line naming the file and the rule."""


class _Invalid(Exception):
    """Raised while compiling one rule; becomes a PolicyError with the file and rule prepended."""


class NotComparable(MissingFact):
    """A fact whose value the operator cannot judge (a string where a number is needed): the rule is unknown."""


def known_groups() -> set:
    """Fact groups something provides (the fact schema, rules/facts.toml)."""
    return set(schema.groups())


# ---------------------------------------------------------------------------------------------------- fact paths

class FactExpr:
    """`group.key[*].key` or `len(…)` of one: parsed and validated once, resolved against facts per run."""

    def __init__(self, text: str, groups: set):
        if not isinstance(text, str) or not text.strip():
            raise _Invalid("a fact path must be a non-empty string")
        self.text = text.strip()
        inner = _LEN.match(self.text)
        self.is_len = bool(inner)
        self.path = inner.group(1).strip() if inner else self.text
        self.steps: List[tuple] = []
        names: List[str] = []
        for segment in self.path.split("."):
            match = _SEGMENT.match(segment)
            if not match:
                raise _Invalid(f"bad fact path {self.text!r} (expected group.key, group.list[*].key or len(path))")
            names.append(match.group(1))
            self.steps.append(("key", match.group(1)))
            for index in _INDEX.findall(match.group(2)):
                self.steps.append(("all",) if index == "*" else ("index", int(index)))
        self.wildcard = any(step[0] == "all" for step in self.steps)
        self._validate(names, groups)
        self.need = ".".join(names[:2])

    def _validate(self, names: List[str], groups: set) -> None:
        group = names[0]
        if group not in groups:
            raise _Invalid(f"fact path {self.path!r}: no probe or reader provides the group {group!r} "
                           f"(known: {', '.join(sorted(groups))})")
        error = schema.path_error(names)
        if error:
            raise _Invalid(f"fact path {self.path!r}: {error}")
        if group == "env" and len(names) > 1:
            from gpudoctor.probes.env import wanted

            if len(names) > 2:
                raise _Invalid(f"fact path {self.path!r}: env holds flat NAME -> value pairs")
            if not wanted(names[1]):
                raise _Invalid(f"fact path {self.path!r}: the env probe does not record {names[1]} "
                               "(see PREFIXES in gpudoctor/probes/env.py)")

    def resolve(self, data: Mapping[str, Any]) -> Any:
        """The value (a list of values when the path has `[*]`; a count for len()). Raises MissingFact if absent."""
        nodes = [data]
        for position, step in enumerate(self.steps):
            following: list = []
            for node in nodes:
                following.extend(self._step(node, step, position))
            nodes = following
        value: Any = nodes if self.wildcard else nodes[0]
        if not self.is_len:
            return value
        if self.wildcard or isinstance(value, (list, str, Mapping)):
            return len(value)
        if value is None:
            return 0
        raise NotComparable(f"{self.path} (len() of a {type(value).__name__})")

    def _step(self, node: Any, step: tuple, position: int) -> list:
        """What one step of the path reaches from a node: a key's value, an index's item, every item for `[*]`.
        Below a known-absent value (None) everything is known-absent, and a `[*]` of it has no items."""
        if step[0] == "all":
            if node is None:
                return []
            if not isinstance(node, list):
                raise NotComparable(f"{self.path} (not a list)")
            return node
        if node is None:
            return [None]
        if step[0] == "index":
            if not isinstance(node, list):
                raise MissingFact(self.path)
            return [node[step[1]] if step[1] < len(node) else None]
        if isinstance(node, Mapping) and step[1] in node:
            return [node[step[1]]]
        if isinstance(node, Mapping) and position == 1 and self.steps[0] == ("key", "env"):
            return [None]  # env was read: a variable it does not carry is unset
        raise MissingFact(self.path)


# ---------------------------------------------------------------------------------------------------- conditions

def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def _version(text: Any, path: str) -> Version:
    try:
        return Version(str(text))
    except InvalidVersion:
        raise NotComparable(f"{path} ({text!r} is not a version)") from None


def _equal(value: Any, literal: Any, path: str) -> bool:
    if value is None:
        return False
    if _kind(value) != _kind(literal):
        raise NotComparable(f"{path} ({_kind(value)} {value!r} compared with {_kind(literal)} {literal!r})")
    return value == literal


def _scalar_test(op: str, literal: Any, path: str) -> Callable[[Any], bool]:
    """The test one fact value must pass. `null` fails every test except `ne`, `not_in` and `missing`."""
    if op == "exists":
        return lambda value: value is not None
    if op == "missing":
        return lambda value: value is None
    if op == "eq":
        return lambda value: _equal(value, literal, path)
    if op == "ne":
        return lambda value: not _equal(value, literal, path)
    if op == "in":
        return lambda value: any(_equal(value, item, path) for item in literal)
    if op == "not_in":
        return lambda value: not any(_equal(value, item, path) for item in literal)
    if op in ("lt", "le", "gt", "ge"):
        compare = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
                   "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}[op]

        def ordered(value: Any) -> bool:
            if value is None:
                return False
            if _kind(value) != "number":
                raise NotComparable(f"{path} ({_kind(value)} {value!r} is not a number; versions: version_lt/ge)")
            return compare(value, literal)

        return ordered
    if op in ("version_lt", "version_ge"):
        wanted = Version(literal)

        def versioned(value: Any) -> bool:
            if value is None:
                return False
            if _kind(value) not in ("string", "number"):
                raise NotComparable(f"{path} ({_kind(value)} {value!r} is not a version)")
            found = _version(value, path)
            return found < wanted if op == "version_lt" else found >= wanted

        return versioned
    pattern = regex.compile(literal)

    def matches(value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, str):
            raise NotComparable(f"{path} ({_kind(value)} {value!r} is not a string)")
        try:
            return pattern.search(value[:MAX_SUBJECT], timeout=MATCH_TIMEOUT) is not None
        except TimeoutError:
            raise NotComparable(f"{path} (the pattern {literal!r} ran past {MATCH_TIMEOUT:g} s on its value)") \
                from None

    return matches


def _check_literal(op: str, table: Mapping[str, Any]) -> Any:
    """The `value` an operator needs, validated at load time."""
    if op in ("exists", "missing"):
        if "value" in table:
            raise _Invalid(f"operator {op!r} takes no value")
        return None
    if "value" not in table:
        raise _Invalid(f"operator {op!r} needs a value")
    return _LITERALS[op](op, table["value"])


def _scalar_literal(op: str, literal: Any) -> Any:
    if _kind(literal) not in ("string", "number", "bool"):
        raise _Invalid(f"operator {op!r}: value must be a string, number or boolean, not {_kind(literal)}")
    return literal


def _number_literal(op: str, literal: Any) -> Any:
    if _kind(literal) != "number" or (isinstance(literal, float) and not math.isfinite(literal)):
        raise _Invalid(f"operator {op!r}: value must be a number (compare versions with version_lt/version_ge)")
    return literal


def _version_literal(op: str, literal: Any) -> str:
    if _kind(literal) not in ("string", "number"):
        raise _Invalid(f"operator {op!r}: value must be a version string such as \"550\" or \"12.4\"")
    try:
        Version(str(literal))
    except InvalidVersion:
        raise _Invalid(f"operator {op!r}: {str(literal)!r} is not a version") from None
    return str(literal)


def _list_literal(op: str, literal: Any) -> Any:
    if not isinstance(literal, list) or not literal:
        raise _Invalid(f"operator {op!r}: value must be a non-empty list")
    kinds = {_kind(item) for item in literal}
    if len(kinds) != 1 or not kinds <= {"string", "number", "bool"}:
        raise _Invalid(f"operator {op!r}: list items must be strings, numbers or booleans, all of one kind")
    return literal


def _pattern_literal(op: str, literal: Any) -> Any:
    if _kind(literal) != "string":
        raise _Invalid("operator 'matches': value must be a regular expression string")
    if len(literal) > MAX_PATTERN:
        raise _Invalid(f"operator 'matches': pattern longer than {MAX_PATTERN} characters")
    try:
        regex.compile(literal)
    except regex.error as exc:
        raise _Invalid(f"operator 'matches': bad regular expression {literal!r}: {exc}") from None
    return literal


# what each operator that takes a value accepts as one (the value, validated; a version as its string)
_LITERALS = {"eq": _scalar_literal, "ne": _scalar_literal, "lt": _number_literal, "le": _number_literal,
             "gt": _number_literal, "ge": _number_literal, "version_lt": _version_literal,
             "version_ge": _version_literal, "in": _list_literal, "not_in": _list_literal, "matches": _pattern_literal}


class Condition:
    """A compiled condition: `evaluate(data, evidence)` is True/False or raises MissingFact (unknown)."""

    def __init__(self, table: Any, groups: set, depth: int = 0):
        if depth > MAX_DEPTH:
            raise _Invalid(f"conditions nested deeper than {MAX_DEPTH}")
        if not isinstance(table, Mapping):
            raise _Invalid(f"a condition must be a table, not {_kind(table)}")
        self.paths: List[FactExpr] = []
        combinators = [key for key in COMBINATORS if key in table]
        if combinators:
            self._combine(table, combinators, groups, depth)
        else:
            self._leaf(table, groups)

    def _combine(self, table: Mapping[str, Any], combinators: List[str], groups: set, depth: int) -> None:
        """`all` / `any` of a list of conditions, or `not` of one."""
        extra = set(table) - {combinators[0]}
        if len(combinators) > 1 or extra:
            raise _Invalid(f"a condition with {combinators[0]!r} takes no other key "
                           f"(found {', '.join(sorted(set(table) - {combinators[0]}))})")
        self.kind = combinators[0]
        parts = table[self.kind]
        if self.kind == "not":
            parts = [parts]
        elif not isinstance(parts, list) or not parts:
            raise _Invalid(f"{self.kind!r} needs a non-empty list of conditions")
        self.parts = [Condition(part, groups, depth + 1) for part in parts]
        for part in self.parts:
            self.paths.extend(part.paths)

    def _leaf(self, table: Mapping[str, Any], groups: set) -> None:
        """A fact, an operator and its value (and a quantifier where the fact selects a list)."""
        unknown_keys = set(table) - {"fact", "op", "value", "quantifier"}
        if unknown_keys:
            raise _Invalid(f"unknown condition key(s) {', '.join(sorted(unknown_keys))} "
                           "(fact, op, value, quantifier; or all / any / not)")
        if "op" not in table or "fact" not in table:
            raise _Invalid("a condition needs 'fact' and 'op' (or one of all / any / not)")
        self.kind = "leaf"
        self.op = table["op"]
        if self.op not in OPERATORS:
            raise _Invalid(f"unknown operator {self.op!r} (known: {' '.join(OPERATORS)})")
        self.fact = FactExpr(table["fact"], groups)
        self.paths.append(self.fact)
        self.literal = _check_literal(self.op, table)
        self.quantifier = table.get("quantifier")
        if self.fact.wildcard and not self.fact.is_len:
            if self.quantifier not in QUANTIFIERS:
                raise _Invalid(f"fact path {self.fact.text!r} selects a list: say quantifier = \"all\" or \"any\"")
        elif self.quantifier is not None:
            raise _Invalid(f"quantifier given but {self.fact.text!r} has no [*]")
        self.test = _scalar_test(self.op, self.literal, self.fact.path)

    def describe(self) -> str:
        """The condition in one line, e.g. `nvml.driver_version version_ge "550"`."""
        if self.kind == "leaf":
            text = f"{self.fact.text} {self.op}"
            if self.op not in ("exists", "missing"):  # what a secret is compared with is never shown
                text += " " + (REDACTED if is_secret_name(self.fact.path) else json.dumps(self.literal))
            return f"{self.quantifier} of {text}" if self.quantifier else text
        if self.kind == "not":
            return f"not ({self.parts[0].describe()})"
        joined = f" {'and' if self.kind == 'all' else 'or'} ".join(part.describe() for part in self.parts)
        return f"({joined})" if len(self.parts) > 1 else joined

    def evaluate(self, data: Mapping[str, Any], evidence: Dict[str, Any]) -> bool:
        if self.kind == "leaf":
            value = self.fact.resolve(data)
            evidence[self.fact.text] = value
            if self.fact.wildcard and not self.fact.is_len:
                results = [self.test(item) for item in value]
                return all(results) if self.quantifier == "all" else any(results)
            return self.test(value)
        if self.kind == "not":
            return not self.parts[0].evaluate(data, evidence)
        outcomes: List[Optional[bool]] = []
        missing: Optional[MissingFact] = None
        for part in self.parts:
            try:
                outcomes.append(part.evaluate(data, evidence))
            except MissingFact as exc:
                missing = missing or exc
                outcomes.append(None)
        decisive = False if self.kind == "all" else True
        if decisive in outcomes:
            return decisive
        if missing is not None:
            raise missing
        return not decisive


# ---------------------------------------------------------------------------------------------------- messages

def _render_value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(_render_value(item) for item in value)
    return str(value)


class Template:
    """A message with `{fact.path}` / `{len(path)}` placeholders (`{{` and `}}` are literal braces)."""

    def __init__(self, text: Any, groups: set, what: str):
        if not isinstance(text, str) or not text.strip():
            raise _Invalid(f"{what} must be a non-empty string")
        self.text = text
        self.paths: List[FactExpr] = []
        for match in _PLACEHOLDER.finditer(text):
            if match.group(1) is not None:
                self.paths.append(FactExpr(match.group(1), groups))
        rest = _PLACEHOLDER.sub("", text)
        if "{" in rest or "}" in rest:
            raise _Invalid(f"{what}: unbalanced brace (write {{{{ or }}}} for a literal one)")

    def render(self, data: Mapping[str, Any]) -> str:
        exprs = iter(self.paths)

        def replace(match: re.Match) -> str:
            if match.group(0) in ("{{", "}}"):
                return match.group(0)[0]
            expr = next(exprs)
            try:
                value = expr.resolve(data)
            except MissingFact:
                return "unknown"
            if value is None and expr.steps[0] == ("key", "env"):
                return "unset"
            return _render_value(value)

        return _PLACEHOLDER.sub(replace, self.text)


# ---------------------------------------------------------------------------------------------------- rules

@overload
def _string(table: Mapping[str, Any], key: str, what: str, required: Literal[True]) -> str: ...


@overload
def _string(table: Mapping[str, Any], key: str, what: str, required: bool = False) -> Optional[str]: ...


def _string(table: Mapping[str, Any], key: str, what: str, required: bool = False) -> Optional[str]:
    """The non-empty string at `key`; None where it is absent, unless `required` (then _Invalid, as for a value
    that is not a non-empty string)."""
    value = table.get(key)
    if value is None:
        if required:
            raise _Invalid(f"missing {what}")
        return None
    if not isinstance(value, str) or not value.strip():
        raise _Invalid(f"{what} must be a non-empty string")
    return value


def _compile_fix(table: Any, groups: set) -> Tuple[dict, Template, str]:
    if not isinstance(table, Mapping):
        raise _Invalid("fix must be a table (summary, applicability, env, commands, docs)")
    extra = set(table) - FIX_KEYS
    if extra:
        raise _Invalid(f"unknown fix key(s) {', '.join(sorted(extra))} ({', '.join(sorted(FIX_KEYS))})")
    summary = Template(table.get("summary"), groups, "fix.summary")
    applicability = table.get("applicability", "display-only")
    if applicability not in [item.value for item in Applicability]:
        raise _Invalid(f"fix.applicability {applicability!r} (safe, unsafe, display-only)")
    env = table.get("env", {})
    if not isinstance(env, Mapping) or set(env) - {"set", "unset"}:
        raise _Invalid("fix.env must be a table with 'set' (NAME = \"value\") and/or 'unset' ([\"NAME\"])")
    to_set = env.get("set", {})
    to_unset = env.get("unset", [])
    if not isinstance(to_set, Mapping) or not all(isinstance(v, str) for v in to_set.values()):
        raise _Invalid("fix.env.set must map variable names to strings")
    if not isinstance(to_unset, list) or not all(isinstance(v, str) for v in to_unset):
        raise _Invalid("fix.env.unset must be a list of variable names")
    for name in list(to_set) + list(to_unset):
        if not is_env_name(name):
            raise _Invalid(f"fix.env: {name!r} is not a variable name")
    commands = table.get("commands", [])
    if not isinstance(commands, list) or not all(isinstance(c, str) for c in commands):
        raise _Invalid("fix.commands must be a list of strings")
    extras = {"env": EnvChange(set=dict(to_set), unset=tuple(to_unset)), "commands": tuple(commands),
              "docs": _string(table, "docs", "fix.docs")}
    return extras, summary, applicability


def _compile_docs(value: Any, what: str, fix: str) -> dict:
    if value is None or isinstance(value, str):
        return {"what": what, "why": "", "fix": fix, "references": [value] if value else []}
    if not isinstance(value, Mapping) or set(value) - DOCS_KEYS:
        raise _Invalid("docs must be a URL string or a table (what, why, fix, references)")
    references = value.get("references", [])
    if isinstance(references, str):
        references = [references]
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        raise _Invalid("docs.references must be a list of strings")
    docs = {key: value.get(key, "") for key in ("what", "why", "fix")}
    if not all(isinstance(text, str) for text in docs.values()):
        raise _Invalid("docs.what, docs.why and docs.fix must be strings")
    docs["what"] = docs["what"] or what
    docs["fix"] = docs["fix"] or fix
    docs["references"] = list(references)
    return docs


def compile_rule(table: Any, groups: set, source: str = "") -> Rule:
    """One `[[rule]]` table as a Rule whose check evaluates its condition; raises _Invalid when it is wrong."""
    if not isinstance(table, Mapping):
        raise _Invalid("a rule must be a table ([[rule]])")
    extra = set(table) - RULE_KEYS
    if extra:
        raise _Invalid(f"unknown key(s) {', '.join(sorted(extra))} (known: {', '.join(sorted(RULE_KEYS))})")
    rule_id, name, severity = _identity(table)
    message = Template(table.get("message"), groups, "message") if "message" in table else None
    if message is None:
        raise _Invalid("missing message")
    kinds = [key for key in ("require", "forbid") if key in table]
    if len(kinds) != 1:
        raise _Invalid("give exactly one of 'require' (fires when false) or 'forbid' (fires when true)")
    condition = Condition(table[kinds[0]], groups)
    fires_when = kinds[0] == "forbid"
    verb = "forbids" if fires_when else "requires"
    summary = _string(table, "summary", "summary") or f"Site policy {verb} {condition.describe()}"
    fix_parts = _compile_fix(table["fix"], groups) if "fix" in table else None
    docs = _compile_docs(table.get("docs"), f"Site policy: {verb} {condition.describe()}; fires when it is "
                         f"{'true' if fires_when else 'false'}.", fix_parts[1].text if fix_parts else "")
    exprs = condition.paths + message.paths + (fix_parts[1].paths if fix_parts else [])
    needs = tuple(dict.fromkeys(expr.need for expr in exprs))
    return Rule(
        id=rule_id,
        name=name,
        severity=severity,
        family="site",
        summary=summary,
        needs=needs,
        host=_on_host(table, needs),
        fix_applicability=fix_parts[2] if fix_parts else "display-only",
        docs={**docs, "policy": source},
        own_check=_policy_check(condition, fires_when, message, fix_parts),
    )


def _identity(table: Mapping[str, Any]) -> Tuple[str, str, Severity]:
    """A rule's id (SITE001, never GD…), its name (the id in lower case when not given) and its severity."""
    rule_id = _string(table, "id", "id", required=True)
    if not POLICY_ID.match(rule_id) or rule_id.startswith("GD"):
        raise _Invalid(f"id {rule_id!r} must be capitals then digits (SITE001) and not start with GD "
                       "(GD IDs are gpudoctor's own)")
    name = _string(table, "name", "name") or rule_id.lower()
    severity_text = _string(table, "severity", "severity", required=True)
    try:
        severity = Severity.parse(severity_text)
    except ValueError as exc:
        raise _Invalid(str(exc)) from None
    return rule_id, name, severity


def _on_host(table: Mapping[str, Any], needs: tuple) -> bool:
    """`host` as given; else whether the rule reads facts that only a machine has (not the job files alone)."""
    host = table.get("host")
    if host is None:
        return not {need.split(".")[0] for need in needs} <= schema.lint_groups()
    if not isinstance(host, bool):
        raise _Invalid("host must be true or false")
    return host


def _policy_check(condition: Condition, fires_when: bool, message: Template, fix_parts):
    """The rule's check: one finding, with its message and fix filled from the facts, when the condition is
    `fires_when`."""
    def check(facts, rule):
        evidence: Dict[str, Any] = {}
        if condition.evaluate(facts.data, evidence) is not fires_when:
            return []
        fix = None
        if fix_parts:
            extras, fix_summary, applicability = fix_parts
            fix = rule.fix(text=fix_summary.render(facts.data), applicability=applicability, **extras)
        return [rule.finding(message.render(facts.data), evidence=evidence, fix=fix)]

    return check


@dataclass(frozen=True)
class SitePolicy:
    """What a policy file says: its rules, and its overrides of rules/preflight.toml (`{"straggler":
    {"below_median": 0.7}}`)."""

    rules: tuple = ()
    preflight: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def preflight_limits(self) -> Dict[str, Dict[str, float]]:
        """rules/preflight.toml's fractions with this site's overrides: what preflight's verdicts judge by."""
        from gpudoctor.knowledge import table

        defaults = table("preflight")
        return {section: {**values, **self.preflight.get(section, {})} for section, values in defaults.items()}


def _preflight_overrides(value: Any, where: str) -> Dict[str, Dict[str, float]]:
    """`[preflight]`: fractions of rules/preflight.toml, by its section and key, each a number with 0 < x ≤ 1."""
    from gpudoctor.knowledge import table

    defaults = table("preflight")
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: preflight must be a table ([preflight.straggler] below_median = 0.6)")
    overrides: Dict[str, Dict[str, float]] = {}
    for section, settings in value.items():
        if section not in defaults or not isinstance(settings, Mapping):
            raise PolicyError(f"{where}: [preflight.{section}] is not a table preflight reads (known: "
                              f"{', '.join(sorted(defaults))})")
        for key, number in settings.items():
            if key not in defaults[section]:
                raise PolicyError(f"{where}: [preflight.{section}] has no setting {key!r} (known: "
                                  f"{', '.join(sorted(defaults[section]))})")
            if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 < number <= 1:
                raise PolicyError(f"{where}: [preflight.{section}] {key} = {number!r}: give a fraction, 0 < x ≤ 1")
            overrides.setdefault(section, {})[key] = float(number)
    return overrides


def load_policy(path: str) -> tuple:
    """The rules of a policy file, sorted by ID; PolicyError (one line: file, rule, what is wrong) otherwise."""
    return load_site(path).rules


def load_site(path: str) -> SitePolicy:
    """A policy file's rules (sorted by ID) and preflight fractions; PolicyError (one line: file, rule, what is
    wrong) otherwise."""
    where = f"policy {path}"
    from gpudoctor.files import read_bytes

    try:
        data = loads_toml(read_bytes(path, MAX_POLICY_BYTES).decode("utf-8"))
    except OSError as exc:
        raise PolicyError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except RecursionError:
        raise PolicyError(f"{where}: invalid TOML: nested too deeply") from None
    except (TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{where}: invalid TOML: {' '.join(str(exc).split())}") from None
    extra = set(data) - {"schema", "rule", "preflight"}
    if extra:
        raise PolicyError(f"{where}: unknown top-level key(s) {', '.join(sorted(extra))} (schema, [[rule]], "
                          "[preflight])")
    if data.get("schema", SCHEMA) != SCHEMA:
        raise PolicyError(f"{where}: schema {data.get('schema')!r} is not {SCHEMA!r}")
    preflight = _preflight_overrides(data["preflight"], where) if "preflight" in data else {}
    tables = data.get("rule", [])
    if not isinstance(tables, list) or not tables and not preflight:
        raise PolicyError(f"{where}: no [[rule]] tables (nor [preflight] settings)")
    return SitePolicy(_compiled(tables, path, where), preflight)


def _compiled(tables: list, path: str, where: str) -> tuple:
    groups = known_groups()
    rules: List[Rule] = []
    seen: Dict[str, int] = {}
    for number, table in enumerate(tables, 1):
        label = table.get("id") if isinstance(table, Mapping) and isinstance(table.get("id"), str) else None
        label = f"rule {label}" if label else f"rule #{number}"
        try:
            rule = compile_rule(table, groups, source=str(Path(path)))
        except _Invalid as exc:
            raise PolicyError(f"{where}: {label}: {' '.join(str(exc).split())}") from None
        if rule.id in seen:
            raise PolicyError(f"{where}: {label}: id used twice (rules #{seen[rule.id]} and #{number})")
        seen[rule.id] = number
        rules.append(rule)
    return tuple(sorted(rules, key=lambda rule: rule.id))
