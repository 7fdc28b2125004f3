"""Every recorded machine yields exactly the findings written in it."""

import json

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.snapshot import load

MACHINES = sorted((FIXTURES / "machines").glob("*.json"))


def test_there_are_enough_machines():
    assert len(MACHINES) >= 8


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_machine_findings(path):
    expected = sorted(json.loads(path.read_text())["expected_findings"])
    report = evaluate(load(str(path)), load_catalog())
    got = sorted(f"{f.rule}:{f.severity}" for f in report.findings)
    assert got == expected, [f.message for f in report.findings]


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_machine_replays_through_the_cli(path, run_cli):
    code, out, err = run_cli("check", "--snapshot", path, "--format", "json")
    data = json.loads(out)
    assert data["schema"] == "gpudoctor.report/1"
    assert data["source"]["kind"] == "snapshot"
    assert code == (1 if data["summary"]["error"] else 0)
    assert err == ""
