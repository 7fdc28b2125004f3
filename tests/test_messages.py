"""The atlas of messages (rules/messages/*.toml, gpudoctor.ingest.atlas): every entry's real samples fire its rule when
pasted, through the log reader's byte prefilter; near-miss lines fire nothing; docs/messages.md is generated from it."""

import io

import pytest

from conftest import ROOT
from gpudoctor.api import evaluate
from gpudoctor.catalog import load_catalog
from gpudoctor.ingest import atlas
from gpudoctor.ingest.logs import ANCHORS
from gpudoctor.ingest.source import snapshot_from_reports
from gpudoctor.model import Severity

SAMPLES = [pytest.param(m, s, id=f"{m.id}-{i}") for m in atlas.messages() for i, s in enumerate(m.samples)]


def pasted(text: str):
    return evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode())))


def test_the_atlas_is_large_and_its_entries_well_formed():
    messages = atlas.messages()
    rules = {rule.id: rule for rule in load_catalog()}
    assert len({m.id for m in messages}) == len(messages)
    for m in messages:
        assert m.anchor.encode() in ANCHORS, f"{m.id}: anchor {m.anchor!r} is not one of the log reader's ANCHORS"
        assert m.anchor in m.trigger or m.anchor in m.pattern.pattern or m.samples, m.id
        assert m.rule in rules and m.samples, m.id
        assert all(s.source.startswith("https://") for s in m.samples), m.id
        assert not m.fix or m.fix in rules[m.rule].docs.get("fixes", {}), f"{m.id}: {m.rule} has no fix case {m.fix}"


@pytest.mark.parametrize("message,sample", SAMPLES)
def test_each_sample_passes_the_prefilter_and_fires_its_rule(message, sample):
    lines = [line for line in sample.text.splitlines() if message.pattern.search(line)]
    assert lines, f"{message.id}: no line of the sample matches the pattern"
    assert any(message.anchor in line and message.trigger in line for line in lines), \
        f"{message.id}: the matching line lacks the anchor {message.anchor!r} or the trigger"
    report = pasted(sample.text)
    assert message.rule in {f.rule for f in report.findings}, [f.rule for f in report.findings]
    if message.fix:  # the message's own remedy, not the rule's general one
        rule = next(rule for rule in load_catalog() if rule.id == message.rule)
        assert {f.fix.summary for f in report.findings if f.rule == message.rule} == {rule.fix_text(message.fix)}


@pytest.mark.parametrize("near", atlas.near_misses(), ids=lambda n: n.text[:50])
def test_near_miss_lines_fire_nothing(near):
    report = pasted(near.text)
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], near.why


def test_a_message_states_its_facts_to_the_rules():
    """torch's capability warning gives the arch list to the rules, as torch.cuda.get_arch_list() would."""
    report = pasted("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
                    "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 "
                    "sm_80 sm_86 sm_90.\n")
    assert report.facts["torch"]["arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert "line 2" in report.evidence["torch.arch_list"]


def test_docs_messages_is_generated_from_the_atlas():
    assert (ROOT / "docs" / "messages.md").read_text(encoding="utf-8") == atlas.render(), \
        "regenerate: python -m gpudoctor.ingest.atlas > docs/messages.md"


def test_lines_no_anchor_admits_are_never_decoded_nor_matched(monkeypatch):
    """The prefilter's cost does not grow with the atlas: a line that holds no anchor reaches no reader."""
    from gpudoctor.ingest import logs

    read = []
    monkeypatch.setattr(logs.LogScanner, "_line", lambda self, name, line_no, raw, anchors=(): read.append(line_no))
    ordinary = b"{'loss': 2.0312, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.01}\n"
    logs.LogScanner().feed("train.log", ordinary * 500 + b"NCCL WARN Call to bind failed\n" + ordinary * 500)
    assert read == [501]


def test_the_trigger_gate_picks_what_trying_each_entry_picks():
    """atlas.match searches an anchor's triggers at once; it finds the entry that trying each in turn would."""
    def each_in_turn(line, anchors):
        for anchor in anchors:
            for message in atlas.by_anchor().get(anchor, ()):
                if message.trigger in line and message.pattern.search(line):
                    return message
        return None

    lines = [line for m in atlas.messages() for s in m.samples for line in s.text.splitlines()]
    lines += [line for near in atlas.near_misses() for line in near.text.splitlines()]
    for line in lines:
        anchors = tuple(word.decode() for word in ANCHORS if word.decode() in line)
        found = atlas.match(line, anchors)
        assert (found[0] if found else None) == each_in_turn(line, anchors), line
    assert sum(atlas.match(line, tuple(a.decode() for a in ANCHORS)) is not None for line in lines) >= len(SAMPLES)
