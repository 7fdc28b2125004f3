"""`--format prometheus`: the text exposition format 0.0.4 for node_exporter's textfile collector,
checked with the reference parser (prometheus_client) on the recorded machines."""

import json

import pytest
from conftest import FIXTURES
from prometheus_client.parser import text_string_to_metric_families

from gpudoctor.render.prometheus import escape_label_value

MACHINES = sorted((FIXTURES / "machines").glob("*.json"))
T4 = FIXTURES / "machines" / "t4-cu121.json"
ALLOWED_LABELS = {"check", "severity", "status", "rule", "name", "probe", "version", "hostname", "source"}


RULE_STATES = {"passed", "unknown", "not_applicable", "info", "warning", "error"}
SEVERITY_RANK = {"info": 1, "warning": 2, "error": 3}


def rule_states(parsed):
    """{rule: (name, current state)} from the gpudoctor_rule_status state set, checking its shape: every state
    present once per rule, exactly one of them 1."""
    seen = {}
    for labels, value in samples(parsed["gpudoctor_rule_status"]):
        assert set(labels) == {"check", "rule", "name", "status"} and value in (0, 1)
        seen.setdefault((labels["rule"], labels["name"]), {})[labels["status"]] = value
    assert len({rule for rule, _ in seen}) == len(seen), "one name per rule"
    current = {}
    for (rule, name), values in seen.items():
        assert set(values) == RULE_STATES, rule
        (state,) = [state for state, value in values.items() if value == 1]
        current[rule] = (name, state)
    return current


def families(text):
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(family):
    return [(dict(sample.labels), sample.value) for sample in family.samples]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda path: path.stem)
def test_parses_and_matches_the_json_report(run_cli, machine):
    code_json, out_json, _ = run_cli("check", "--snapshot", machine, "--format", "json")
    code, text, err = run_cli("check", "--snapshot", machine, "--format", "prometheus")
    assert err == "" and code == code_json
    report = json.loads(out_json)
    parsed = families(text)
    assert set(parsed) >= {"gpudoctor_info", "gpudoctor_findings", "gpudoctor_rule_status",
                           "gpudoctor_probe_seconds", "gpudoctor_probe_ok", "gpudoctor_check_timestamp_seconds"}
    for family in parsed.values():
        assert family.type == "gauge" and family.documentation
        for sample in family.samples:
            assert sample.timestamp is None  # the textfile collector rejects timestamps
            assert set(sample.labels) <= ALLOWED_LABELS

    findings = {labels["severity"]: value for labels, value in samples(parsed["gpudoctor_findings"])}
    assert findings == {sev: report["summary"][sev] for sev in ("error", "warning", "info")}

    states = rule_states(parsed)  # one current state per rule
    by_status = {rule: state for rule, (_, state) in states.items()}
    assert sum(1 for s in by_status.values() if s == "passed") == report["summary"]["passed"]
    assert sum(1 for s in by_status.values() if s == "unknown") == report["summary"]["unknown"]
    assert {s["rule"] for s in report["not_applicable"]} == {r for r, s in by_status.items() if s == "not_applicable"}
    assert len(report["not_applicable"]) == report["summary"]["not_applicable"]
    outcomes = {labels["status"]: value for labels, value in samples(parsed["gpudoctor_rules"])}
    assert outcomes["not_applicable"] == report["summary"]["not_applicable"]
    fired = {f["rule"] for f in report["findings"]}
    assert fired == {r for r, s in by_status.items() if s in ("info", "warning", "error")}
    for rule in fired:
        worst = max((f for f in report["findings"] if f["rule"] == rule), key=lambda f: SEVERITY_RANK[f["severity"]])
        assert by_status[rule] == worst["severity"] and states[rule][0] == worst["name"]
    assert all(name for name, _ in states.values()), "every rule series carries its name, fired or not"

    probes = {labels["probe"]: value for labels, value in samples(parsed["gpudoctor_probe_ok"])}
    assert probes == {p["name"]: (1 if p["status"] == "ok" else 0) for p in report["probes"]}
    probe_states = {}
    for labels, value in samples(parsed["gpudoctor_probe_status"]):
        probe_states.setdefault(labels["probe"], {})[labels["status"]] = value
    for probe in report["probes"]:
        assert set(probe_states[probe["name"]]) == {"ok", "failed", "timeout", "skipped"}
        assert {state for state, value in probe_states[probe["name"]].items() if value == 1} == {probe["status"]}
    seconds = {labels["probe"]: value for labels, value in samples(parsed["gpudoctor_probe_seconds"])}
    assert seconds == pytest.approx({p["name"]: p["seconds"] for p in report["probes"]})

    (info, value), = samples(parsed["gpudoctor_info"])
    assert value == 1 and info["version"] == report["tool"]["version"]
    assert info["hostname"] == (report["host"]["hostname"] or "")

    # no message text, fix text or evidence value ever becomes a label
    label_values = {v for family in parsed.values() for s in family.samples for v in s.labels.values()}
    for finding in report["findings"]:
        texts = [finding["message"], (finding["fix"] or {}).get("summary") or ""]
        texts += [str(v) for v in finding["evidence"].values() if len(str(v)) > 12]
        for text_ in filter(None, texts):
            assert not any(text_ in value for value in label_values)
    assert "message" not in text


def test_hostile_hostname_is_escaped_and_round_trips(tmp_path, run_cli):
    snapshot = json.loads(T4.read_text())
    hostile = 'evil"} gpudoctor_findings{severity="error"} 0\nx\\y'
    snapshot["facts"]["host"]["hostname"] = hostile
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(snapshot))
    _, text, _ = run_cli("check", "--snapshot", path, "--format", "prometheus")
    info_lines = [line for line in text.splitlines() if line.startswith("gpudoctor_info{")]
    assert len(info_lines) == 1  # the newline did not split the sample
    parsed = families(text)
    (info, _), = samples(parsed["gpudoctor_info"])
    assert info["hostname"] == hostile
    assert len(parsed["gpudoctor_findings"].samples) == 3  # nothing injected


def test_escape_label_value():
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'


def test_env_values_never_appear(tmp_path, run_cli):
    snapshot = json.loads(T4.read_text())
    snapshot["facts"]["env"]["HF_TOKEN"] = "hf_secret_value"
    snapshot["facts"]["env"]["NCCL_DEBUG"] = "INFO"
    path = tmp_path / "t4.json"
    path.write_text(json.dumps(snapshot))
    _, text, _ = run_cli("check", "--snapshot", path, "--format", "prometheus")
    assert "hf_secret_value" not in text and "HF_TOKEN" not in text


def test_output_file_for_the_textfile_collector(tmp_path, run_cli):
    target = tmp_path / "gpudoctor.prom"
    code, out, _ = run_cli("check", "--snapshot", T4, "--format", "prometheus", "--output", target)
    assert out == "" and code == 0
    text = target.read_text()
    assert text.endswith("\n") and "gpudoctor_rule_status{" in text
    assert families(text)["gpudoctor_findings"].samples


def test_select_limits_the_rule_series(run_cli):
    _, text, _ = run_cli("check", "--snapshot", T4, "--format", "prometheus", "--select", "GD2")
    rules = {labels["rule"] for labels, _ in samples(families(text)["gpudoctor_rule_status"])}
    assert rules and all(rule.startswith("GD2") for rule in rules)


def test_a_state_change_keeps_every_series_identity(run_cli):
    """A healthy node that turns bad changes values, never the set of series: a rule's series stays the same one
    (node_exporter's state-set convention), so Prometheus sees the change instead of one series ending and another
    starting. Site policy rules carry their names whether they fire or pass."""
    def series(machine):
        _, text, _ = run_cli("check", "--snapshot", FIXTURES / "machines" / machine, "--format", "prometheus",
                             "--select", "GD5,SITE", "--policy", FIXTURES / "policies" / "site.toml")
        parsed = families(text)
        keys = {tuple(sorted(labels.items())) for labels, _ in samples(parsed["gpudoctor_rule_status"])}
        return keys, rule_states(parsed)

    healthy, healthy_states = series("h100x8-healthy.json")
    bad, bad_states = series("k8s-pod-a100x8.json")
    assert healthy == bad
    assert healthy_states["GD506"][1] == "passed" and bad_states["GD506"][1] == "error"
    assert healthy_states["SITE004"] == ("site-gpus-idle", "passed") and bad_states["SITE004"][1] == "error"
