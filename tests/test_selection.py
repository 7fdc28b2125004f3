"""--select/--ignore name real rules, and a report that judged nothing never shows a green ✓."""

import json

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import load_catalog

HEALTHY = FIXTURES / "machines" / "h100x8-healthy.json"
POLICY = FIXTURES / "policies" / "site.toml"


@pytest.mark.parametrize("flag, code, closest", [
    ("--select", "GD999", None),
    ("--select", "banana", None),
    ("--select", "GD4O6", "GD406"),   # a letter O for a zero
    ("--ignore", "GD4O6", "GD406"),
    ("--select", "GD105,GD5O", None),  # one bad code among good ones
])
def test_a_code_that_matches_no_rule_is_a_usage_error(run_cli, flag, code, closest):
    exit_code, out, err = run_cli("check", "--snapshot", HEALTHY, flag, code)
    assert exit_code == 2 and out == ""
    assert err.count("\n") == 1 and flag in err and "matches no rule" in err
    if closest:
        assert f"did you mean {closest}" in err


def test_site_policy_ids_are_real_ids_and_suggested(run_cli):
    assert run_cli("check", "--snapshot", HEALTHY, "--policy", POLICY, "--select", "SITE001")[0] == 0
    exit_code, _, err = run_cli("check", "--snapshot", HEALTHY, "--policy", POLICY, "--select", "SITE0010")
    assert exit_code == 2 and "did you mean SITE001" in err
    exit_code, _, err = run_cli("check", "--snapshot", HEALTHY, "--select", "SITE001")  # no policy loaded
    assert exit_code == 2 and "matches no rule" in err


def test_lower_case_prefixes_still_select(run_cli):
    lower = run_cli("check", "--snapshot", HEALTHY, "--select", "gd5", "--format", "json")
    upper = run_cli("check", "--snapshot", HEALTHY, "--select", "GD5", "--format", "json")
    assert lower[0] == upper[0] == 0
    assert json.loads(lower[1])["summary"] == json.loads(upper[1])["summary"]
    assert json.loads(upper[1])["summary"]["passed"] > 0


def test_a_report_that_evaluated_no_rule_is_never_green(run_cli, tmp_path):
    """A machine whose NVML facts are unknown: the GPU health rules cannot run, and the summary must say so."""
    snapshot = json.loads(HEALTHY.read_text())
    del snapshot["facts"]["nvml"]
    path = tmp_path / "no-nvml.json"
    path.write_text(json.dumps(snapshot))
    exit_code, out, _ = run_cli("check", "--snapshot", path, "--select", "GD502,GD506", "--format", "plain")
    assert exit_code == 0
    summary = " ".join(out.strip().split("\n\n")[-1].split())  # the last paragraph, wrapped at 80 columns
    assert "✓" not in summary and "no rule could be evaluated" in summary and "2 unknown" in summary
    exit_code, out, _ = run_cli("check", "--snapshot", HEALTHY, "--select", "GD502,GD506", "--format", "plain")
    assert out.strip().splitlines()[-1].strip().startswith("✓ 0 errors")


def test_torch_not_installed_is_an_info_finding_and_its_rules_unknown(run_cli, tmp_path):
    """The job's interpreter has no torch: say which interpreter, report the torch-build rules unknown (never
    passed), and never fail the check (a Prolog with --fail-on error must not drain the node for it)."""
    snapshot = json.loads(HEALTHY.read_text())
    snapshot["facts"]["torch"] = {"status": "missing", "python": "/usr/bin/python3", "python_version": "3.11.2",
                                  "error": "No module named 'torch'", "deepspeed": {"version": None}}
    path = tmp_path / "no-torch.json"
    path.write_text(json.dumps(snapshot))
    exit_code, out, _ = run_cli("check", "--snapshot", path, "--select", "GD1", "--format", "json")
    report = json.loads(out)
    assert exit_code == 0
    (finding,) = report["findings"]
    assert finding["rule"] == "GD110" and finding["severity"] == "info" and "/usr/bin/python3" in finding["message"]
    unknown = {item["rule"] for item in report["unknown"]}
    assert {"GD101", "GD103", "GD104", "GD109"} <= unknown
    driver_rules = [rule for rule in load_catalog() if rule.id.startswith("GD1")]
    assert report["summary"]["passed"] + len(unknown) + 1 == len(driver_rules)  # passed, unknown or the finding
