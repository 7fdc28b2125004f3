"""A rule's verdict reused across a fleet's nodes (gpudoctor.memo): only where the facts that rule read are the same,
which holds only because every rule reads the facts through the tracked accessor (Facts.get and what calls it)."""

import copy
import io
import json

import pytest
from conftest import FIXTURES
from fleet_mix import write_mixed

import gpudoctor.fleet as fleet_module
from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate, run_rule
from gpudoctor.facts import NOWHERE, WHOLE, Facts
from gpudoctor.facts.log_evidence import log_findings
from gpudoctor.memo import VerdictMemo, exact
from gpudoctor.render.fleet import render
from gpudoctor.snapshot import Snapshot, load

RULES = load_catalog()
KNOWN = sorted(rule.id for rule in RULES)


def _put(tree: dict, path: str, value) -> None:
    """`value` at `path` in `tree` (a variable's name after `env.` is one segment, as Facts reads it)."""
    *parents, last = ("env", path[4:]) if path.startswith("env.") else path.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = copy.deepcopy(value)


def _judged(check, data: dict):
    """(the findings, what was missing) of a rule's logic on these facts, and what the logs prove for it
    (facts.log_evidence), and every path either read with its value."""
    facts = Facts({"probes": [], **data, "rules": {"known": KNOWN}})
    with facts.watching() as seen:
        findings, missing = run_rule(check, facts)
        from_log = run_rule(check, facts, log_findings)[0]
    return (findings, missing and (missing.path, missing.reason), from_log), seen


def _reads_suffice(rule, data: dict) -> bool:
    """The rule gives the same result on facts that hold only what it read: nothing else it looked at counts."""
    result, seen = _judged(rule, data)
    if any(value is WHOLE for value in seen.values()):
        return True  # it read every fact at once: the memo never keeps its verdict
    kept: dict = {"env": {}} if isinstance(data.get("env"), dict) else {}  # the environment shown whole: context
    for path, value in seen.items():
        if value is not NOWHERE and not path.startswith("rules."):  # the same known rules on both
            _put(kept, path, value)
    return _judged(rule, kept)[0] == result


EXAMPLES = [(rule, example) for rule in RULES for example in rule.examples]


@pytest.mark.parametrize("rule,example", EXAMPLES, ids=lambda x: getattr(x, "id", None) or x.name)
def test_every_rule_reads_its_facts_only_through_the_tracked_accessor(rule, example):
    """What makes a reused verdict right: each catalog rule, on each of its examples, gives the same result on
    facts cut down to the paths it read (and their values)."""
    assert _reads_suffice(rule, dict(example.facts))


RECORDED = sorted((FIXTURES / "machines").glob("*.json")) + sorted((FIXTURES / "fleet").glob("*.json"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: path.stem)
def test_every_rule_reads_a_recorded_machine_only_through_the_tracked_accessor(path):
    """The same on the recorded machines and fleet nodes, every rule of the catalog on each."""
    data = json.loads(path.read_text())["facts"]
    assert [rule.id for rule in RULES if not _reads_suffice(rule, data)] == []


def test_a_rule_that_reads_the_facts_behind_the_accessor_is_caught():
    """The check above fails for a rule that reads a value the accessor did not record."""
    from dataclasses import replace

    def sneaky(facts, rule):
        facts.get("nvml.driver_version", None)
        if facts._data.get("host", {}).get("shm_bytes", 2**30) < 2**27:  # read behind Facts.get's back
            yield rule.finding("small /dev/shm")

    def honest(facts, rule):
        facts.get("nvml.driver_version", None)
        if facts.get("host.shm_bytes", 2**30) < 2**27:
            yield rule.finding("small /dev/shm")

    rule = next(rule for rule in RULES if rule.id == "GD503")
    data = {"nvml": {"driver_version": "550.90.07"}, "host": {"shm_bytes": 64 * 2**20}}
    assert not _reads_suffice(replace(rule, own_check=sneaky), data)
    assert _reads_suffice(replace(rule, own_check=honest), data)


@pytest.mark.parametrize("one,other", [(1, 1.0), (1, True), (0, False), ("1", 1), (0.0, -0.0), ([1], [True]),
                                       ([1], (1,)), ({"a": 1, "b": 2}, {"b": 2, "a": 1}), (None, NOWHERE),
                                       ([], {}), ("", None)])
def test_values_are_compared_exactly(one, other):
    assert exact(one, {}) != exact(other, {})
    assert exact(one, {}) == exact(copy.deepcopy(one), {})


def test_every_rules_examples_judged_with_one_memo_are_judged_as_alone():
    """All the catalog's examples as the nodes of one fleet, in turn, each rule judging all of them with one memo:
    every verdict is the one the example gets on its own (an example that lacks a fact another had stays unknown,
    never passed)."""
    for rule in RULES:
        memo = VerdictMemo()
        for example in rule.examples * 2:  # the second time round, every verdict comes from the memo
            alone = evaluate(Snapshot(facts=dict(example.facts)), [rule])
            shared = evaluate(Snapshot(facts=dict(example.facts)), [rule], memo=memo)
            assert (shared.findings, shared.passed, shared.unknown, shared.not_applicable) == \
                   (alone.findings, alone.passed, alone.unknown, alone.not_applicable), (rule.id, example.name)


def test_an_unknown_fact_is_never_taken_for_the_known_one_of_another_node():
    h100 = json.loads((FIXTURES / "fleet" / "dgx-01.json").read_text())
    blind = copy.deepcopy(h100)
    del blind["facts"]["host"]["shm_bytes"]
    memo = VerdictMemo()
    rules = [rule for rule in RULES if rule.id == "GD503"]
    first, second = (evaluate(Snapshot(facts=doc["facts"]), rules, memo=memo) for doc in (h100, blind))
    assert first.passed == ("GD503",) and not first.unknown
    assert second.passed == () and [item.rule for item in second.unknown] == ["GD503"]


def _as_written(paths, fmt: str, alone: bool = False) -> str:
    """The fleet report of the files; `alone`: each node read from its own file (no groups shared, no node judged
    with another) and every rule judged on every node (no memo)."""
    if alone:
        snapshots = [load(path) for path in paths]
        real = fleet_module.evaluate
        fleet_module.evaluate = lambda snapshot, rules, **memo: real(snapshot, rules)
    else:
        snapshots = fleet_module.read_fleet(paths)
    try:
        fleet = fleet_module.evaluate_fleet(fleet_module.fleet_nodes(snapshots, paths), load_catalog())
    finally:
        if alone:
            fleet_module.evaluate = real
    out = io.StringIO()
    render(fleet, fmt, out)
    return out.getvalue()


def test_a_drifting_fleet_reads_byte_for_byte_as_its_nodes_judged_alone(tmp_path):
    """96 nodes, no two alike, drifting as real clusters do (tests/fleet_mix.py: findings that quote a node's own
    GPU UUID, unknowns, secrets, pasted facts): the report with groups shared, nodes and verdicts reused is the
    report of every node read and judged on its own, JSON and text, byte for byte."""
    paths = write_mixed(tmp_path, 96)
    for fmt in ("json", "plain"):
        shared, alone = _as_written(paths, fmt), _as_written(paths, fmt, alone=True)
        assert shared == alone
    document = json.loads(shared if fmt == "json" else _as_written(paths, "json"))
    kinds = {json.dumps({key: node[key] for key in ("findings", "unknown")}) for node in document["nodes"]}
    assert len(kinds) >= 8  # nodes whose findings and unknowns differ, not one verdict for all
    assert any("GPU-00000018" in json.dumps(node["findings"]) for node in document["nodes"])  # a node's own UUID
