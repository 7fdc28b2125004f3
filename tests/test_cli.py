"""The command-line contract: formats, selection, exit codes, rules and explain."""

import json

import pytest
from conftest import FIXTURES

A100_OLD_DRIVER = FIXTURES / "machines" / "a100-driver470-cu121.json"
T4 = FIXTURES / "machines" / "t4-cu121.json"


def test_plain_report_reads_without_colour(run_cli):
    code, out, err = run_cli("check", "--snapshot", A100_OLD_DRIVER)
    assert code == 1 and err == ""
    assert "\x1b[" not in out
    assert "✗ GD101 driver-too-old" in out
    assert "driver 470.182.03 supports CUDA ≤ 11.4" in out
    assert "pip install --force-reinstall torch==2.1.2 --index-url https://download.pytorch.org/whl/cu118" in out
    assert out.rstrip().split("\n\n")[-1].strip().startswith("1 error · 0 warnings")


@pytest.mark.parametrize("cuda,torch,pin", [
    ("11.8", "2.1.2+cu121", "torch==2.1.2"),        # 2.1 publishes cu118: the user's own version
    ("11.8", "2.8.0+cu128", "'torch==2.7.*'"),      # the newest release with cu118 before the user's
    ("12.8", "2.3.1+cu121", "'torch==2.7.*'"),      # none before: the first release that has it
])
def test_gd101_reinstall_is_pinned(cuda, torch, pin):
    """Never an unpinned reinstall that jumps torch to the index's newest build
    (rules/torch_wheels.toml [[release]])."""
    from gpudoctor.checks.driver_cuda import _install_command

    (command,) = _install_command(cuda, torch)
    index = f"https://download.pytorch.org/whl/cu{cuda.replace('.', '')}"
    assert command == f"pip install --force-reinstall {pin} --index-url {index}"


def test_json_report_follows_the_contract(run_cli):
    code, out, _ = run_cli("check", "--snapshot", A100_OLD_DRIVER, "--format", "json")
    data = json.loads(out)
    assert set(data) >= {"schema", "tool", "source", "host", "summary", "findings", "probes"}
    finding = data["findings"][0]
    assert finding["rule"] == "GD101" and finding["severity"] == "error"
    assert finding["evidence"] == {"driver": "470.182.03", "driver_cuda": "11.4", "torch_cuda": "12.1",
                                   "min_driver": "525.60.13"}
    assert finding["fix"]["applicability"] == "display-only"
    assert set(finding["fix"]["env"]) == {"set", "unset"}
    assert data["host"] == {"hostname": "gpu-a100-legacy", "os": "Linux 5.15.0-105-generic"}
    assert data["summary"]["error"] == 1 and data["summary"]["unknown"] == 0


def test_markdown_report_is_redacted(tmp_path, run_cli):
    snapshot = json.loads(T4.read_text())
    snapshot["facts"]["env"]["HF_TOKEN"] = "hf_secret_value"
    path = tmp_path / "t4.json"
    path.write_text(json.dumps(snapshot))
    code, out, _ = run_cli("check", "--snapshot", path, "--format", "markdown")
    assert out.startswith("## gpudoctor")
    assert "**GD201 bf16-unsupported**" in out and "| GPU 0 | Tesla T4 (sm_75) |" in out
    assert "hf_secret_value" not in out and "ip-172-31-5-9" not in out


@pytest.mark.parametrize("args,code", [
    ((), 1),
    (("--ignore", "GD101"), 0),
    (("--select", "GD2"), 0),
    (("--select", "GD1", "--ignore", "GD10", "--fail-on", "never"), 0),
])
def test_selection_and_exit_codes(run_cli, args, code):
    assert run_cli("check", "--snapshot", A100_OLD_DRIVER, "--format", "json", *args)[0] == code


def test_fail_on_info(run_cli):
    assert run_cli("check", "--snapshot", T4, "--format", "json")[0] == 0
    assert run_cli("check", "--snapshot", T4, "--format", "json", "--fail-on", "info")[0] == 1


def test_output_file(tmp_path, run_cli):
    target = tmp_path / "report.json"
    code, out, _ = run_cli("check", "--snapshot", T4, "--format", "json", "--output", target)
    assert out == "" and json.loads(target.read_text())["findings"][0]["rule"] == "GD201"


@pytest.mark.parametrize("argv", [("check", "--bogus"), ("check", "--fail-on", "sometimes"), ("explain", "GD999"),
                                  ("nosuchcommand",), ("check", "--timeout", "0")])
def test_usage_errors_are_one_line_exit_2(run_cli, argv):
    code, out, err = run_cli(*argv)
    assert code == 2 and err.startswith("gpudoctor: error:") and err.count("\n") == 1


def test_rules_json(run_cli):
    code, out, _ = run_cli("rules", "--format", "json")
    data = json.loads(out)
    assert data["schema"] == "gpudoctor.rules/1"
    first = data["rules"][0]
    assert set(first) == {"id", "name", "severity", "family", "summary", "fix_applicability"}


def test_explain(run_cli):
    code, out, _ = run_cli("explain", "gd101")
    assert code == 0
    for heading in ("What it checks", "Why it matters", "How to fix", "References"):
        assert heading in out
    code, out, _ = run_cli("explain", "GD101", "--format", "json")
    assert json.loads(out)["docs"]["references"]


def test_internal_error_is_exit_3(run_cli, mocker):
    mocker.patch("gpudoctor.engine.evaluate", side_effect=RuntimeError("boom"))
    code, out, err = run_cli("check", "--snapshot", T4)
    assert code == 3 and "internal error" in err and "Traceback" not in err


def test_only_the_probes_the_selected_rules_need_run(run_cli):
    code, out, _ = run_cli("check", "--select", "GD107", "--format", "json")
    assert {p["name"] for p in json.loads(out)["probes"]} == {"env", "nvml", "system"}
    code, out, _ = run_cli("check", "--select", "GD503", "--format", "json")
    assert {p["name"] for p in json.loads(out)["probes"]} == {"system"}


@pytest.mark.parametrize("argv,hint", [
    (["chek"], "did you mean check?"), (["explain", "GD1O1"], "did you mean GD101?"),
    (["check", "--ds_config", "x.json"], "did you mean --ds-config?"), (["bench", "ncl"], "did you mean nccl?"),
])
def test_a_near_miss_is_named(run_cli, argv, hint):
    code, _, err = run_cli(*argv)
    assert code == 2 and hint in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("option,what", [("--ds-config", "DeepSpeed config"), ("--script", "script"),
                                         ("--env-file", "env file")])
def test_a_directory_given_for_a_file_says_so(run_cli, tmp_path, option, what):
    code, _, err = run_cli("check", "--snapshot", A100_OLD_DRIVER, option, tmp_path)
    assert code == 2 and f"cannot read {what} '{tmp_path}': is a directory" in err


def test_check_from_help_mentions_logs(run_cli, capsys):
    with pytest.raises(SystemExit):
        run_cli("check", "--help")
    assert "a training job's log" in " ".join(capsys.readouterr().out.split())
