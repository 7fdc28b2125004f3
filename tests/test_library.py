"""gpudoctor as a library: collect → evaluate → format_report, without argparse, agreeing with the CLI."""

import json

import pytest
from conftest import FIXTURES

import gpudoctor
from gpudoctor.errors import InputError

T4 = FIXTURES / "machines" / "t4-cu121.json"
BAD_ENV = FIXTURES / "jobs" / "bad.env"


def cli_rules(run_cli, *argv):
    code, out, _ = run_cli(*argv, "--format", "json")
    return code, sorted(f["rule"] for f in json.loads(out)["findings"])


def test_recorded_snapshot_gives_the_same_findings_as_check(run_cli):
    report = gpudoctor.evaluate(gpudoctor.collect(gpudoctor.Request(snapshot=str(T4))))
    _, expected = cli_rules(run_cli, "check", "--snapshot", T4)
    assert expected and sorted(f.rule for f in report.findings) == expected
    data = json.loads(gpudoctor.format_report(report, "json"))
    assert sorted(f["rule"] for f in data["findings"]) == expected


def test_job_files_give_the_same_findings_as_lint(run_cli):
    snapshot = gpudoctor.collect(gpudoctor.Request(files=(str(BAD_ENV),)))
    report = gpudoctor.evaluate(snapshot)
    _, expected = cli_rules(run_cli, "lint", BAD_ENV)
    assert "GD402" in expected and sorted(f.rule for f in report.findings) == expected
    assert "GD402" in gpudoctor.format_report(report, "plain")


def test_select_narrows_the_rules():
    snapshot = gpudoctor.collect(gpudoctor.Request(files=(str(BAD_ENV),)))
    report = gpudoctor.evaluate(snapshot, select=["GD410"])
    assert {f.rule for f in report.findings} == {"GD410"} and not report.passed


def test_a_selection_that_matches_no_rule_is_an_input_error():
    snapshot = gpudoctor.collect(gpudoctor.Request(files=(str(BAD_ENV),)))
    with pytest.raises(InputError, match="'GD4O6' matches no rule"):
        gpudoctor.evaluate(snapshot, select=["GD4O6"])


def test_overlays_apply_on_a_recorded_snapshot():
    snapshot = gpudoctor.collect(gpudoctor.Request(snapshot=str(T4), env_files=(str(BAD_ENV),), model="0.5B"))
    assert snapshot.facts["model"]["params"] == 500_000_000
    assert str(BAD_ENV) in snapshot.source["paths"]


@pytest.mark.parametrize("request_, message", [
    (dict(snapshot="no/such.json"), "no such file"),
    (dict(files=("no/such.env",)), "no such file"),
    (dict(snapshot=str(T4), reports=("no/such.log",)), "cannot read report 'no/such.log': no such file"),
    (dict(files=(str(BAD_ENV),), snapshot=str(T4)), "take no snapshot"),
    (dict(snapshot=str(T4), scripts=("no/such.py",)), "cannot read script"),
    (dict(snapshot=str(T4), ds_config="no/such.json"), "cannot read DeepSpeed config"),
    (dict(snapshot=str(T4), model="banana"), "neither a size"),
    (dict(timeout=0), "--timeout must be positive"),
])
def test_unusable_input_is_one_input_error(request_, message):
    with pytest.raises(InputError, match=message):
        gpudoctor.collect(gpudoctor.Request(**request_))


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError):
        gpudoctor.no_such_call  # noqa: B018


@pytest.mark.parametrize("worst,fail_on,code", [
    (None, "info", 0), ("info", "info", 1), ("info", "warning", 0), ("warning", "warning", 1),
    ("warning", "error", 0), ("error", "error", 1), ("error", "never", 0),
])
def test_one_exit_code_for_reports_and_fleets(worst, fail_on, code):
    from gpudoctor.model import Severity, exit_code

    assert exit_code(Severity.parse(worst) if worst else None, fail_on) == code


def test_docs_library_example_runs(monkeypatch, capsys):
    """The example in docs/library.md runs as written, from the repository root, and prints the findings."""
    import re

    from conftest import ROOT

    monkeypatch.chdir(ROOT)
    (example,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "library.md").read_text(), re.S)
    exec(compile(example, "docs/library.md", "exec"), {})
    out = capsys.readouterr().out
    assert "GD402" in out and "2 errors" in out


def test_the_other_documents_are_the_clis(run_cli, monkeypatch):
    def cli(*argv):
        code, out, err = run_cli(*argv, "--format", "json")
        assert code in (0, 1), err
        return json.loads(out)

    model = str(FIXTURES / "models" / "qwen2.5-0.5b.config.json")
    assert gpudoctor.estimate_memory(model, {"zero_stage": 3, "world_size": 4}, gpu="4090") == cli(
        "estimate", "--model", model, "--zero-stage", "3", "--world-size", "4", "--gpu", "4090")
    assert gpudoctor.describe_rule("gd503") == cli("explain", "GD503")
    assert gpudoctor.rule_catalog() == cli("rules")
    log = FIXTURES / "logs" / "nccl_efa_plugin_failed.log"
    report = gpudoctor.evaluate(gpudoctor.collect_pasted(log.read_text(encoding="utf-8")))
    monkeypatch.setattr("sys.stdin", open(log, encoding="utf-8"))
    expected = sorted(f["rule"] for f in cli("check", "--from", "-")["findings"])
    assert expected and sorted(f.rule for f in report.findings) == expected
    with pytest.raises(InputError, match="nothing to read"):
        gpudoctor.collect_pasted("")
    with pytest.raises(InputError, match="no rule 'GD999'"):
        gpudoctor.describe_rule("GD999")
