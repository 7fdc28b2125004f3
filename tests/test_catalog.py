"""Meta-tests over the rule catalog, and every rule's documented examples run through the engine."""

import re

import pytest

from gpudoctor.catalog import FAMILIES, PLACEHOLDER, RULE_ID, load_catalog, select_rules
from gpudoctor.checks import registered_checks
from gpudoctor.engine import evaluate
from gpudoctor.ingest import atlas
from gpudoctor.model import Severity
from gpudoctor.snapshot import Snapshot

RULES = load_catalog()
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def test_catalog_is_complete():
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert set(registered_checks()) == set(ids), "every rule file needs a check and every check a rule file"
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_is_well_formed(rule):
    assert RULE_ID.match(rule.id)
    assert KEBAB.match(rule.name)
    assert rule.family == FAMILIES[rule.id[:3]].name
    for section in ("what", "why", "fix"):
        assert len(rule.docs.get(section, "").strip()) > 30, f"{rule.id}: docs.{section} too short"
    assert isinstance(rule.docs.get("references"), list)
    assert rule.fix_applicability in ("safe", "unsafe", "display-only", "none")
    assert any(ex.fires for ex in rule.examples), f"{rule.id} needs a firing example"
    assert any(not ex.fires for ex in rule.examples), f"{rule.id} needs a passing example"
    for example in rule.examples:  # `explain --format json` shows them: they say what the example is
        assert not re.search(r"\bseed \d|issue \d|#\d", example.name), f"{rule.id}: internal label {example.name!r}"
    words = " ".join([rule.summary, *map(str, rule.docs.values()), *(example.name for example in rule.examples)])
    assert "TODO" not in words, f"{rule.id}: a TODO of tools/new_rule.py is left in its catalog entry"


EXAMPLES = [(rule, example) for rule in RULES for example in rule.examples]


@pytest.mark.parametrize("rule,example", EXAMPLES, ids=lambda x: getattr(x, "id", None) or x.name)
def test_example(rule, example):
    report = evaluate(Snapshot(facts=dict(example.facts)), [rule])
    fired = [f for f in report.findings if f.rule == rule.id]
    assert not [f for f in report.findings if "crashed" in f.message], report.findings
    assert not report.unknown or not example.fires, f"unknown: {report.unknown}"
    if example.fires:
        assert fired, f"{rule.id} should fire on {example.name!r}"
        if example.severity:
            assert {str(f.severity) for f in fired} == {example.severity}
        for finding in fired:
            assert finding.message and finding.fix and finding.fix.summary
    else:
        assert not fired, f"{rule.id} should not fire on {example.name!r}: {fired[0].message}"


def _without(facts: dict, paths) -> dict:
    """A deep copy of example facts with the fact at each dotted path removed; a machine fact (an input with
    `absent_when`) is taken away as a machine without it records it: its probe's group holds only that."""
    import copy

    from gpudoctor.catalog import INPUTS

    facts = copy.deepcopy(dict(facts))
    for path in paths:
        absent = INPUTS[path].absent_when if path in INPUTS else None
        if absent:
            group, _, leaf = absent[0].partition(".")
            facts[group] = {leaf: absent[1]}
            if path.split(".")[0] == group:
                continue
        *parents, last = path.split(".")
        node = facts
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return facts


def _findings(rule, facts: dict) -> list:
    """What the rule's check yields on these facts (nothing when a fact it needs is missing)."""
    from gpudoctor.facts import Facts, MissingFact

    try:
        return list(rule.check(Facts({"rules": {"known": [r.id for r in RULES]}, **facts}), rule) or ())
    except MissingFact:
        return []


WITH_INPUTS = [rule for rule in RULES if rule.inputs]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_inputs_are_known_and_needed(rule):
    """`input` names what the rule judges (catalog.INPUTS), and it is among the facts the rule reads."""
    from gpudoctor.catalog import INPUTS

    read = rule.needs + rule.optional
    for name in rule.inputs:
        assert name in INPUTS
        assert any(name == need or name.startswith(need + ".") or need.startswith(name + ".") for need in read), \
            f"{rule.id}: input {name} is not in needs"


@pytest.mark.parametrize("rule", WITH_INPUTS, ids=lambda r: r.id)
def test_a_rule_judges_nothing_without_its_input(rule):
    """The declaration agrees with the check: without any of its inputs, no example makes it fire — so the engine
    may call it not applicable without running it; and some passing example gives the input, so it truly passes."""
    from gpudoctor.catalog import INPUTS

    for example in rule.examples:
        assert not _findings(rule, _without(example.facts, rule.inputs)), f"{rule.id} fires on {example.name!r} " \
            f"without {', '.join(rule.inputs)}"
        for name in rule.inputs:
            value = _without(example.facts, [n for n in rule.inputs if n != name])
            node = value
            for part in name.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, list) and INPUTS[name].least > 1:  # too few entries: still nothing to judge
                node[INPUTS[name].least - 1:] = []
                assert not _findings(rule, value), f"{rule.id} fires on {example.name!r} with {len(node)} {name}"
    passing = [ex for ex in rule.examples if not ex.fires]
    assert any(evaluate(Snapshot(facts=dict(ex.facts)), [rule]).passed for ex in passing), \
        f"{rule.id}: no passing example gives {' or '.join(rule.inputs)}: it would only show 'not applicable'"


@pytest.mark.parametrize("rule", [rule for rule in RULES if not rule.inputs], ids=lambda r: r.id)
def test_a_rule_without_an_input_judges_more_than_the_optional_inputs(rule):
    """A rule that declares no input must judge something every run has: one of its firing examples still fires
    with every optional input (catalog.INPUTS) taken away. Otherwise its check returns early on an absent input,
    and a run without that input would count it as passed: it must declare the input."""
    from gpudoctor.catalog import INPUTS

    firing = [ex for ex in rule.examples if ex.fires]
    optional = [name for name, entry in INPUTS.items() if entry.absent_when is None]  # machine facts stay
    assert any(_findings(rule, _without(ex.facts, optional)) for ex in firing), \
        f"{rule.id} fires only with one of {', '.join(INPUTS)}: declare what it judges as `input`"


def test_a_rule_without_its_input_is_not_applicable_not_passed():
    rule = next(rule for rule in RULES if rule.id == "GD304")
    report = evaluate(Snapshot(facts={}), [rule])
    assert (report.passed, report.unknown, report.findings) == ((), (), ())
    assert [(item.rule, item.reason) for item in report.not_applicable] == [("GD304", "no DeepSpeed config")]
    assert not report.judged()
    config = {"ds_config": {"path": "ds.json", "config": {"zero_optimization": {"stage": 3}}}}
    assert evaluate(Snapshot(facts=config), [rule]).passed == ("GD304",)


def test_any_one_input_is_enough_and_a_fleet_needs_two_nodes():
    gd202 = next(rule for rule in RULES if rule.id == "GD202")
    t4 = {"nvml": {"gpus": [{"index": 0, "name": "Tesla T4", "cc": "7.5"}]}}
    assert evaluate(Snapshot(facts={**t4, "env": {}}), [gd202]).not_applicable
    report = evaluate(Snapshot(facts={**t4, "env": {"ACCELERATE_MIXED_PRECISION": "fp8"}}), [gd202])
    assert [f.rule for f in report.findings] == ["GD202"]
    gd801 = next(rule for rule in RULES if rule.id == "GD801")
    one = {"fleet": {"nodes": [{"node": "a", "facts": {"nvml": {"driver_version": "550.54.14"}}}]}}
    assert [item.reason for item in evaluate(Snapshot(facts=one), [gd801]).not_applicable] == ["no fleet"]


def test_prefix_selection_most_specific_wins():
    chosen = {r.id for r in select_rules(RULES, ["GD1"], ["GD10", "GD101"])}
    assert not any(i.startswith("GD10") for i in chosen)
    chosen = {r.id for r in select_rules(RULES, ["GD101"], ["GD1"])}
    assert chosen == {"GD101"}
    assert {r.id for r in select_rules(RULES, [], ["GD0"])} == {r.id for r in RULES if not r.id.startswith("GD0")}


def test_a_crashing_rule_becomes_gd001():
    boom = RULES[0].__class__(**{**RULES[0].__dict__, "id": "GD999", "inputs": (),
                                    "own_check": lambda facts, rule: 1 / 0})
    report = evaluate(Snapshot(facts={}), [boom])
    assert [f.rule for f in report.findings] == ["GD001"]
    assert "GD999" in report.findings[0].message and "ZeroDivisionError" in report.findings[0].message
    assert report.findings[0].severity == Severity.WARNING


def test_facts_tell_unknown_from_none():
    from gpudoctor.facts import Facts, MissingFact

    facts = Facts({"torch": {"cuda": None}})
    assert facts.has("torch.cuda") and facts.get("torch.cuda") is None
    assert not facts.has("env") and not facts.has("torch.version")
    assert facts.get("env", {}) == {}
    with pytest.raises(MissingFact):
        facts.get("nvml.driver_version")


class RecordingFacts:
    """Facts that remember which fact groups a rule read."""

    def __init__(self, data):
        from gpudoctor.facts import Facts

        self._facts = Facts(data)
        self.groups = set()

    def __getattr__(self, name):
        return getattr(self._facts, name)

    def get(self, path, *default):
        self.groups.add(path.split(".")[0])
        return self._facts.get(path, *default)

    def has(self, path):
        self.groups.add(path.split(".")[0])
        return self._facts.has(path)

    def env(self, name, default=None):
        self.groups.add("env")
        return self._facts.env(name, default)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_needs_declare_every_fact_group_a_rule_reads(rule):
    """`needs` decides which probes run: a group read but not declared would silently stay unknown."""
    from gpudoctor.facts import MissingFact

    declared = {need.split(".")[0] for need in rule.needs + rule.optional}
    for example in rule.examples:
        facts = RecordingFacts({"probes": [], **example.facts})
        try:
            list(rule.check(facts, rule) or ())
        except MissingFact:
            pass  # the groups read so far still count
        assert facts.groups <= declared | {"probes"}, f"{rule.id} reads {facts.groups - declared} undeclared"


# A rule's fix text lives in its catalog file: `docs.fix`, or `docs.fixes[case]` where the remedy depends on the
# case; checks pass only the case and the values (`rule.fix(case="oom", values={...})`).


def _check_modules() -> dict:
    """Each check module's short name → the rules whose check it holds."""
    by_module = {}
    checks = registered_checks()
    for rule in RULES:
        by_module.setdefault(checks[rule.id].__module__.rsplit(".", 1)[1], []).append(rule)
    return by_module


FIXES_MADE_ELSEWHERE = {"doctor": ("engine.py",)}  # GD001's crashed-rule finding is the engine's


def _fix_calls(module: str) -> list:
    import ast
    from pathlib import Path

    import gpudoctor.checks

    package = Path(gpudoctor.checks.__file__).parent
    sources = [package / f"{module}.py"] + [package.parent / name for name in FIXES_MADE_ELSEWHERE.get(module, ())]
    return [node for source in sources for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fix"]


def _text_in_code(call) -> bool:
    return bool(call.args) or any(keyword.arg == "text" for keyword in call.keywords)


def _cases(call) -> set:
    """The case names a call can pass: the strings of its `case=` expression, outside calls (`d.get("kind")`)."""
    import ast

    def strings(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif not isinstance(node, ast.Call):
            for child in ast.iter_child_nodes(node):
                yield from strings(child)

    return {text for keyword in call.keywords if keyword.arg == "case" for text in strings(keyword.value)}


@pytest.mark.parametrize("module", sorted(_check_modules()))
def test_fix_text_lives_in_the_catalog(module):
    calls = _fix_calls(module)
    assert not [call.lineno for call in calls if _text_in_code(call)], f"checks/{module}.py writes fix text in code"
    rules = _check_modules()[module]
    written = {case for rule in rules for case in rule.docs.get("fixes", {})}
    used = set().union(*(_cases(call) for call in calls)) if calls else set()
    used |= {message.fix for message in atlas.messages() if message.fix and message.rule in {r.id for r in rules}}
    assert used <= written, f"checks/{module}.py names cases no catalog file has: {used - written}"
    assert written <= used, f"catalog fix texts no check of checks/{module}.py uses: {written - used}"


def _value_names(call) -> set:
    """The literal keys of the `values=` a call passes (every dict inside the expression, conditional ones too)."""
    import ast

    return {key.value for keyword in call.keywords if keyword.arg == "values" for node in ast.walk(keyword.value)
            if isinstance(node, ast.Dict) for key in node.keys if isinstance(key, ast.Constant)}


@pytest.mark.parametrize("module", sorted(_check_modules()))
def test_every_value_a_check_passes_has_its_placeholder(module):
    """A value name no template of the call's cases holds would raise when that branch runs (GD001 instead of the
    finding); branches no example reaches are checked here, statically."""
    rules = _check_modules()[module]
    for call in _fix_calls(module):
        templates = [rule.docs.get("fixes", {}).get(case, "") if case else rule.docs.get("fix", "")
                     for rule in rules for case in (_cases(call) or {""})]
        holes = set().union(*(set(PLACEHOLDER.findall(text)) for text in templates))
        assert _value_names(call) <= holes, f"checks/{module}.py:{call.lineno}: {_value_names(call) - holes}"


@pytest.mark.parametrize("rule", [rule for rule in RULES if "fixes" in rule.docs], ids=lambda r: r.id)
def test_fix_cases_are_text(rule):
    for case, text in rule.docs["fixes"].items():
        assert re.match(r"^[a-z][a-z0-9_]*$", case) and len(text.strip()) > 30, (rule.id, case)


def test_fix_text_fills_only_its_own_placeholders():
    rule = next(rule for rule in RULES if rule.id == "GD201")
    template = rule.docs["fix"]
    filled = rule.__class__(**{**rule.__dict__, "docs": {**rule.docs, "fix": "Install <version> (<cuXYZ>)."}})
    assert filled.fix(values={"version": "2.4.1"}).summary == "Install 2.4.1 (<cuXYZ>)."
    with pytest.raises(ValueError, match="no <gpus>"):
        filled.fix(values={"gpus": "A100"})
    assert rule.fix().summary == template and rule.fix(case="info").summary == rule.docs["fixes"]["info"]


def test_a_crashed_rule_is_reported_with_gd001s_catalog_fix():
    from gpudoctor.engine import run_rule
    from gpudoctor.facts import Facts

    crashing = RULES[0].__class__(**{**RULES[0].__dict__, "own_check": lambda facts, rule: [1 / 0]})
    (finding,), missing = run_rule(crashing, Facts({}))
    doctor = next(rule for rule in RULES if rule.id == "GD001")
    assert (finding.rule, missing) == ("GD001", None) and "crashed: ZeroDivisionError" in finding.message
    assert finding.fix.summary == doctor.docs["fixes"]["rule_crashed"]


def test_fix_text_fills_in_one_pass():
    """A filled-in value is the user's text (a variable name, a value): a `<name>` inside it stays as written."""
    rule = next(rule for rule in RULES if rule.id == "GD201")
    filled = rule.__class__(**{**rule.__dict__, "docs": {**rule.docs, "fix": "Set <variable>=<value>."}})
    assert filled.fix(values={"variable": "A_<value>", "value": "<variable>"}).summary == "Set A_<value>=<variable>."
