"""Never a false ✓: a rule whose input was not given (no DeepSpeed config, no script, no log …) is "not applicable",
a state of its own in every output — never counted as passed, never a failure, and never enough for a green report."""

import json

from conftest import FIXTURES

from gpudoctor.catalog import load_catalog

HEALTHY = FIXTURES / "machines" / "h100x8-healthy.json"
ZERO2_OFFLOAD = FIXTURES / "ds_configs" / "zero2_offload.json"
DS_CONFIG_RULES = {"GD304", "GD305", "GD306", "GD307", "GD308", "GD309"}


def summary_paragraph(out: str) -> str:
    """The report's last paragraph (the summary line, wrapped at 80 columns) on one line."""
    return " ".join(out.strip().split("\n\n")[-1].split())


def test_a_plain_check_counts_what_it_had_nothing_to_judge_apart(run_cli):
    code, out, _ = run_cli("check", "--snapshot", HEALTHY, "--format", "json")
    report = json.loads(out)
    idle = {item["rule"]: item["reason"] for item in report["not_applicable"]}
    assert code == 0 and report["summary"]["not_applicable"] == len(idle)
    assert {rule: idle.get(rule) for rule in DS_CONFIG_RULES} == dict.fromkeys(DS_CONFIG_RULES, "no DeepSpeed config")
    assert idle["GD602"] == "no script" and idle["GD701"] == "no NCCL benchmark" and idle["GD424"] == "no log"
    assert idle["GD501"] == "no model" and idle["GD606"] == "no launch command"
    assert "GD101" not in idle and "GD406" not in idle  # the machine and its environment were there to judge

    code, text, _ = run_cli("check", "--snapshot", HEALTHY, "--format", "plain")
    line = summary_paragraph(text)
    counts = report["summary"]
    assert line.startswith(f"✓ 0 errors · 0 warnings · 0 info · {counts['passed']} passed · 0 unknown · "
                           f"{counts['not_applicable']} not applicable (no DeepSpeed config, no script, "
                           "no launch command, "
                           "no log, …)"), line
    fired = {finding["rule"] for finding in report["findings"]}
    assert counts["passed"] + counts["unknown"] + counts["not_applicable"] + len(fired) == len(load_catalog())


def test_with_a_deepspeed_config_its_rules_judge_again(run_cli):
    code, out, _ = run_cli("check", "--snapshot", HEALTHY, "--ds-config", ZERO2_OFFLOAD, "--select", "GD30",
                           "--format", "json")  # GD301-GD309 (GD310 reads build logs)
    report = json.loads(out)
    assert report["not_applicable"] == [] and report["summary"]["not_applicable"] == 0
    fired = {finding["rule"] for finding in report["findings"]}
    assert "GD304" in fired  # offload_param at ZeRO stage 2
    assert report["summary"]["passed"] == 9 - len(fired)


def test_a_report_where_every_rule_was_not_applicable_is_never_green(run_cli):
    code, out, _ = run_cli("check", "--snapshot", HEALTHY, "--select", "GD304,GD305", "--format", "plain")
    line = summary_paragraph(out)
    assert code == 0  # not applicable is never a failure
    assert "✓" not in line and line == ("0 errors · 0 warnings · 0 info · 0 passed · 0 unknown · 2 not applicable "
                                        "(no DeepSpeed config) · no rule had anything to judge")
    for fail_on in ("warning", "info"):
        assert run_cli("check", "--snapshot", HEALTHY, "--select", "GD3", "--fail-on", fail_on)[0] == 0


def test_markdown_says_not_applicable(run_cli):
    _, out, _ = run_cli("check", "--snapshot", HEALTHY, "--select", "GD304,GD305,GD101", "--format", "markdown")
    assert "**0 errors · 0 warnings · 0 info** · 1 passed · 0 unknown · 2 not applicable (no DeepSpeed config)" in out


def test_prometheus_state_set_has_not_applicable(run_cli):
    _, out, _ = run_cli("check", "--snapshot", HEALTHY, "--select", "GD304,GD101", "--format", "prometheus")
    lines = set(out.splitlines())
    assert ('gpudoctor_rule_status{check="gpudoctor",rule="GD304",name="ds-offload-param-needs-zero3",'
            'status="not_applicable"} 1') in lines
    assert ('gpudoctor_rule_status{check="gpudoctor",rule="GD304",name="ds-offload-param-needs-zero3",'
            'status="passed"} 0') in lines
    assert ('gpudoctor_rule_status{check="gpudoctor",rule="GD101",name="driver-too-old",status="not_applicable"} 0'
            in lines)
    assert 'gpudoctor_rules{check="gpudoctor",status="not_applicable"} 1' in lines
    assert 'gpudoctor_rules{check="gpudoctor",status="passed"} 1' in lines


def test_a_rule_the_log_judges_applies_with_a_log(run_cli):
    log = FIXTURES / "logs" / "cuda_oom_traceback.log"
    _, out, _ = run_cli("check", "--snapshot", HEALTHY, "--from", log, "--select", "GD508,GD424", "--format", "json")
    report = json.loads(out)
    assert report["not_applicable"] == []
    assert [finding["rule"] for finding in report["findings"]] == ["GD508"] and report["summary"]["passed"] == 1


def test_explain_says_when_a_rule_is_not_applicable(run_cli):
    _, out, _ = run_cli("explain", "GD304")
    said = "Not applicable (neither passed nor failed) when there is no DeepSpeed config."
    assert " ".join(out.split()).count(said) == 1
    _, out, _ = run_cli("explain", "GD105")
    assert "Not applicable" not in out


def test_a_machine_without_a_gpu_judges_no_gpu_rule():
    """No NVIDIA driver (NVML unavailable, as on a laptop or a login node) or a CPU-only torch: the GPU and CUDA
    rules had nothing to judge; an NVML that failed leaves them unknown instead — never passed either way."""
    from gpudoctor.api import collect, evaluate
    from gpudoctor.gather import Request

    laptop = evaluate(collect(Request(snapshot=str(FIXTURES / "machines" / "laptop-no-nvidia.json"))))
    idle = {item.rule: item.reason for item in laptop.not_applicable}
    assert {idle[rule] for rule in ("GD101", "GD104", "GD201", "GD502", "GD506")} == {"no NVIDIA driver"}
    assert idle["GD102"] == "CPU-only torch" and not {"GD101", "GD201", "GD502"} & set(laptop.passed)
    broken = evaluate(collect(Request(snapshot=str(FIXTURES / "machines" / "driver-library-mismatch.json"))))
    assert {"GD101", "GD502", "GD506"} <= {item.rule for item in broken.unknown}
    assert not {"GD101", "GD502", "GD506"} & {item.rule for item in broken.not_applicable}


def test_the_json_report_names_every_rule_by_its_outcome(run_cli):
    """Each selected rule is in exactly one place: a finding, `passed`, `unknown` or `not_applicable`."""
    _, out, _ = run_cli("check", "--snapshot", HEALTHY, "--format", "json")
    data = json.loads(out)
    places = [{f["rule"] for f in data["findings"]}, set(data["passed"]),
              {item["rule"] for item in data["unknown"]}, {item["rule"] for item in data["not_applicable"]}]
    assert sum(len(place) for place in places) == len(set().union(*places)) == len(load_catalog())
    assert len(data["passed"]) == data["summary"]["passed"] and "GD101" in data["passed"]
