"""Site policies (`--policy FILE`, gpudoctor.policy): operators, combinators, list paths, messages, load errors, CLI."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FIXTURES, ROOT

from gpudoctor.catalog import needed_groups
from gpudoctor.engine import evaluate
from gpudoctor.policy import OPERATORS, PolicyError, compile_rule, known_groups, load_policy
from gpudoctor.snapshot import Snapshot

SITE = FIXTURES / "policies" / "site.toml"
HEALTHY = FIXTURES / "machines" / "h100x8-healthy.json"
K8S = FIXTURES / "machines" / "k8s-pod-a100x8.json"

GPU = {"name": "NVIDIA H100 80GB HBM3", "memory_used_bytes": 0, "processes": []}
FACTS = {
    "nvml": {"status": "ok", "driver_version": "550.90.07", "gpus": [dict(GPU, index=i) for i in range(8)]},
    "torch": {"version": "2.5.1+cu124", "cuda": "12.4", "device_count": 8, "cuda_available": True},
    "env": {"NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "WARN"},
    "host": {"cpu_count": 128, "in_container": False},
}


def rule_of(condition, kind="require", **extra):
    table = {"id": "SITE900", "severity": "error", "message": "site rule fired", kind: condition, **extra}
    return compile_rule(table, known_groups())


def outcome(rule, facts=None):
    """'fired', 'passed' or 'unknown' for one rule on the facts."""
    report = evaluate(Snapshot(facts=json.loads(json.dumps(FACTS if facts is None else facts))), [rule])
    assert not [f for f in report.findings if f.rule != rule.id], report.findings  # no crash finding
    if report.unknown:
        return "unknown"
    return "fired" if report.findings else "passed"


def leaf(fact, op, value=None, **extra):
    table = {"fact": fact, "op": op, **extra}
    if value is not None:
        table["value"] = value
    return table


# ------------------------------------------------------------------------------------------------ operators

OPERATOR_CASES = [
    # (fact, op, value, holds on FACTS)
    ("host.cpu_count", "eq", 128, True),
    ("host.cpu_count", "eq", 64, False),
    ("env.NCCL_IB_HCA", "eq", "mlx5", True),
    ("env.NCCL_IB_HCA", "ne", "mlx5", False),
    ("env.NCCL_DEBUG", "ne", "INFO", True),
    ("host.in_container", "eq", False, True),
    ("host.cpu_count", "lt", 129, True),
    ("host.cpu_count", "lt", 128, False),
    ("host.cpu_count", "le", 128, True),
    ("host.cpu_count", "le", 127, False),
    ("host.cpu_count", "gt", 127, True),
    ("host.cpu_count", "gt", 128, False),
    ("host.cpu_count", "ge", 128, True),
    ("host.cpu_count", "ge", 128.5, False),
    ("nvml.driver_version", "version_ge", "550", True),
    ("nvml.driver_version", "version_ge", "550.100", False),
    ("nvml.driver_version", "version_lt", "555", True),
    ("nvml.driver_version", "version_lt", "550.90.07", False),
    ("torch.cuda", "version_ge", 12, True),
    ("env.NCCL_IB_HCA", "in", ["mlx5", "mlx5_0"], True),
    ("env.NCCL_IB_HCA", "in", ["bnxt_re"], False),
    ("env.NCCL_IB_HCA", "not_in", ["bnxt_re"], True),
    ("env.NCCL_IB_HCA", "not_in", ["mlx5"], False),
    ("torch.cuda", "exists", None, True),
    ("env.NCCL_SOCKET_IFNAME", "exists", None, False),
    ("env.NCCL_SOCKET_IFNAME", "missing", None, True),
    ("torch.version", "missing", None, False),
    ("torch.cuda", "matches", r"^12\.", True),
    ("torch.version", "matches", r"\+cu11", False),
]


@pytest.mark.parametrize("fact,op,value,holds", OPERATOR_CASES, ids=lambda x: str(x))
def test_operator(fact, op, value, holds):
    assert outcome(rule_of(leaf(fact, op, value))) == ("passed" if holds else "fired")
    assert outcome(rule_of(leaf(fact, op, value), kind="forbid")) == ("fired" if holds else "passed")


def test_every_operator_is_tested():
    assert {case[1] for case in OPERATOR_CASES} == set(OPERATORS)


def test_null_fails_every_test_but_ne_not_in_missing():
    facts = dict(FACTS, torch=dict(FACTS["torch"], cuda=None))  # a CPU-only torch build
    for op, value in (("eq", "12.4"), ("version_ge", "12"), ("version_lt", "13"), ("matches", "."),
                      ("in", ["12.4"]), ("exists", None)):
        assert outcome(rule_of(leaf("torch.cuda", op, value)), facts) == "fired", op
    for op, value in (("ne", "12.4"), ("not_in", ["12.4"]), ("missing", None)):
        assert outcome(rule_of(leaf("torch.cuda", op, value)), facts) == "passed", op
    facts = dict(FACTS, host={"cpu_count": None})
    assert outcome(rule_of(leaf("host.cpu_count", "ge", 1)), facts) == "fired"


def test_values_an_operator_cannot_judge_are_unknown_not_false():
    assert outcome(rule_of(leaf("nvml.driver_version", "gt", 500))) == "unknown"  # a version is not a number
    assert outcome(rule_of(leaf("host.cpu_count", "eq", "128"))) == "unknown"  # number vs string
    assert outcome(rule_of(leaf("host.cpu_count", "matches", "1"))) == "unknown"
    facts = dict(FACTS, nvml=dict(FACTS["nvml"], driver_version="not a version"))
    assert outcome(rule_of(leaf("nvml.driver_version", "version_ge", "550")), facts) == "unknown"


def test_matches_is_a_search_with_a_capped_subject():
    facts = dict(FACTS, env={"NCCL_IB_HCA": "x" * 5000 + "mlx5"})
    assert outcome(rule_of(leaf("env.NCCL_IB_HCA", "matches", "mlx5"))) == "passed"
    assert outcome(rule_of(leaf("env.NCCL_IB_HCA", "matches", "mlx5")), facts) == "fired"


# ------------------------------------------------------------------------------------------------ combinators

TRUE = leaf("host.cpu_count", "eq", 128)
FALSE = leaf("host.cpu_count", "eq", 1)
UNKNOWN = leaf("nvcc.version", "exists")  # FACTS carry no nvcc group


@pytest.mark.parametrize("condition,expected", [
    ({"all": [TRUE, TRUE]}, "passed"),
    ({"all": [TRUE, FALSE]}, "fired"),
    ({"any": [FALSE, TRUE]}, "passed"),
    ({"any": [FALSE, FALSE]}, "fired"),
    ({"not": FALSE}, "passed"),
    ({"not": TRUE}, "fired"),
    ({"not": {"any": [FALSE, {"all": [TRUE, {"not": FALSE}]}]}}, "fired"),
    # three-valued: a false part decides `all`, a true part decides `any`, otherwise unknown wins
    ({"all": [UNKNOWN, FALSE]}, "fired"),
    ({"all": [UNKNOWN, TRUE]}, "unknown"),
    ({"any": [UNKNOWN, TRUE]}, "passed"),
    ({"any": [UNKNOWN, FALSE]}, "unknown"),
    ({"not": UNKNOWN}, "unknown"),
])
def test_combinators(condition, expected):
    assert outcome(rule_of(condition)) == expected


# ------------------------------------------------------------------------------------------------ list paths

def test_list_paths_with_quantifiers():
    h100 = leaf("nvml.gpus[*].name", "matches", "H100")
    assert outcome(rule_of(dict(h100, quantifier="all"))) == "passed"
    mixed = dict(FACTS, nvml=dict(FACTS["nvml"], gpus=[GPU, dict(GPU, name="NVIDIA A100-SXM4-80GB")]))
    assert outcome(rule_of(dict(h100, quantifier="all")), mixed) == "fired"
    assert outcome(rule_of(dict(h100, quantifier="any")), mixed) == "passed"
    none = dict(FACTS, nvml=dict(FACTS["nvml"], gpus=[]))
    assert outcome(rule_of(dict(h100, quantifier="all")), none) == "passed"  # vacuously true
    assert outcome(rule_of(dict(h100, quantifier="any")), none) == "fired"
    assert outcome(rule_of(leaf("nvml.gpus[1].name", "matches", "A100")), mixed) == "passed"
    assert outcome(rule_of(leaf("nvml.gpus[9].name", "missing")), mixed) == "passed"  # past the end: none


def test_len_counts_gpus_and_flattened_processes():
    assert outcome(rule_of(leaf("len(nvml.gpus)", "eq", 8))) == "passed"
    four = dict(FACTS, nvml=dict(FACTS["nvml"], gpus=[GPU] * 4))
    assert outcome(rule_of(leaf("len(nvml.gpus)", "eq", 8)), four) == "fired"
    busy = dict(FACTS, nvml=dict(FACTS["nvml"], gpus=[GPU, dict(GPU, processes=[{"pid": 1}, {"pid": 2}])]))
    idle = leaf("len(nvml.gpus[*].processes[*])", "eq", 0)
    assert outcome(rule_of(idle)) == "passed"
    assert outcome(rule_of(idle), busy) == "fired"
    assert outcome(rule_of(leaf("len(nvml.gpus[*].processes[*])", "eq", 2)), busy) == "passed"


def test_a_missing_key_on_one_element_is_unknown():
    names_only = dict(FACTS, nvml={"gpus": [{"name": "Tesla T4"}]})  # a collect_env report: names only
    rule = rule_of(leaf("nvml.gpus[*].memory_used_bytes", "eq", 0, quantifier="all"))
    assert outcome(rule, names_only) == "unknown"


# ------------------------------------------------------------------------------------------------ unknown facts

def test_missing_fact_is_unknown_and_env_variables_absent_are_unset():
    assert outcome(rule_of(leaf("nvcc.version", "version_ge", "12"))) == "unknown"
    assert outcome(rule_of(leaf("env.NCCL_SOCKET_IFNAME", "eq", "eth0"))) == "fired"
    assert outcome(rule_of(leaf("env.NCCL_SOCKET_IFNAME", "eq", "eth0")), {"nvml": {}}) == "unknown"
    report = evaluate(Snapshot(facts={"host": {}}), [rule_of(leaf("nvml.driver_version", "version_ge", "550"))])
    assert [(u.rule, u.missing) for u in report.unknown] == [("SITE900", "nvml.driver_version")]


def test_needs_drive_the_probes():
    rules = load_policy(str(SITE))
    assert needed_groups(rules) == {"nvml", "env", "torch"}
    assert all(rule.host for rule in rules)
    lint_only = rule_of(leaf("requests.bf16", "exists"))
    assert not lint_only.host and lint_only.needs == ("requests.bf16",)


# ------------------------------------------------------------------------------------------------ messages and fixes

def test_message_placeholders():
    facts = dict(FACTS, nvml=dict(FACTS["nvml"], driver_version="535.161.08"))
    rule = compile_rule({
        "id": "SITE901", "severity": "warning", "require": leaf("nvml.driver_version", "version_ge", "550"),
        "message": "driver {nvml.driver_version} < 550 on {len(nvml.gpus)} GPUs; IFNAME={env.NCCL_SOCKET_IFNAME}; "
                   "nvcc {nvcc.version}; {{literal}}",
        "fix": {"summary": "upgrade from {nvml.driver_version}", "applicability": "safe",
                "env": {"set": {"NCCL_IB_HCA": "mlx5"}, "unset": ["NCCL_DEBUG"]}, "docs": "https://example.org"},
    }, known_groups())
    report = evaluate(Snapshot(facts=facts), [rule])
    (finding,) = report.findings
    assert finding.message == "driver 535.161.08 < 550 on 8 GPUs; IFNAME=unset; nvcc unknown; {literal}"
    assert str(finding.severity) == "warning" and finding.family == "site"
    assert finding.evidence == {"nvml.driver_version": "535.161.08"}
    assert finding.fix.summary == "upgrade from 535.161.08"
    assert finding.fix.to_json()["env"] == {"set": {"NCCL_IB_HCA": "mlx5"}, "unset": ["NCCL_DEBUG"]}
    assert finding.fix.applicability.value == "safe" and finding.fix.docs == "https://example.org"


def test_list_placeholders_join_values():
    rule = rule_of(leaf("len(nvml.gpus)", "eq", 1), message="GPUs: {nvml.gpus[*].index}")
    (finding,) = evaluate(Snapshot(facts=FACTS), [rule]).findings
    assert finding.message == "GPUs: 0, 1, 2, 3, 4, 5, 6, 7"


# ------------------------------------------------------------------------------------------------ load errors

BASE = 'id = "SITE010"\nseverity = "error"\nmessage = "m"\n'
LOAD_ERRORS = [
    ("unknown operator", BASE + 'require = { fact = "nvml.driver_version", op = "version_gte", value = "550" }',
     "rule SITE010: unknown operator 'version_gte'"),
    ("unknown group", BASE + 'require = { fact = "gpu.driver", op = "exists" }',
     "rule SITE010: fact path 'gpu.driver': no probe or reader provides the group 'gpu'"),
    ("unknown key", BASE + 'require = { fact = "nvml.driver_verison", op = "exists" }',
     "nvml has no key 'driver_verison'"),
    ("unknown GPU key", BASE + 'require = { fact = "nvml.gpus[*].nmae", op = "exists", quantifier = "all" }',
     "nvml.gpus has no key 'nmae'"),
    ("env not recorded", BASE + 'require = { fact = "env.HOME", op = "exists" }', "does not record HOME"),
    ("no quantifier", BASE + 'require = { fact = "nvml.gpus[*].name", op = "exists" }', 'quantifier = "all"'),
    ("bad placeholder", 'id = "SITE010"\nseverity = "error"\nmessage = "driver {nvml.drvier}"\n'
     'require = { fact = "nvml.driver_version", op = "exists" }', "nvml has no key 'drvier'"),
    ("missing message", 'id = "SITE010"\nseverity = "error"\nrequire = { fact = "nvml.status", op = "exists" }',
     "rule SITE010: missing message"),
    ("GD id", 'id = "GD101"\nseverity = "error"\nmessage = "m"\nrequire = { fact = "nvml.status", op = "exists" }',
     "rule GD101: id 'GD101' must be capitals then digits (SITE001) and not start with GD"),
    ("lower-case id", 'id = "site1"\nseverity = "error"\nmessage = "m"\n'
     'require = { fact = "nvml.status", op = "exists" }', "must be capitals then digits"),
    ("bad severity", 'id = "SITE010"\nseverity = "fatal"\nmessage = "m"\n'
     'require = { fact = "nvml.status", op = "exists" }', "unknown severity 'fatal'"),
    ("no condition", BASE, "exactly one of 'require'"),
    ("ordered needs number", BASE + 'require = { fact = "nvml.driver_version", op = "ge", value = "550" }',
     "value must be a number"),
    ("bad version", BASE + 'require = { fact = "torch.cuda", op = "version_ge", value = "twelve" }',
     "'twelve' is not a version"),
    ("bad regex", BASE + 'require = { fact = "torch.cuda", op = "matches", value = "(" }', "bad regular expression"),
    ("long regex", BASE + 'require = { fact = "torch.cuda", op = "matches", value = "' + "a" * 201 + '" }',
     "longer than 200"),
    ("typo key", BASE + 'requires = { fact = "torch.cuda", op = "exists" }', "unknown key(s) requires"),
    ("bad fix applicability", BASE + 'require = { fact = "torch.cuda", op = "exists" }\n'
     'fix = { summary = "s", applicability = "maybe" }', "fix.applicability 'maybe'"),
]


def write_policy(tmp_path, body, name="policy.toml"):
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


@pytest.mark.parametrize("body,expected", [(b, e) for _, b, e in LOAD_ERRORS], ids=[n for n, _, _ in LOAD_ERRORS])
def test_load_errors_exit_2_with_one_line(tmp_path, run_cli, body, expected):
    path = write_policy(tmp_path, "[[rule]]\n" + body + "\n")
    code, out, err = run_cli("check", "--snapshot", HEALTHY, "--policy", path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"gpudoctor: error: policy {path}: "), err
    assert expected in err, err


@pytest.mark.parametrize("body,expected", [
    ("[[rule]\nid = 1", "invalid TOML"),
    ('[[rule]]\nid = "SITE1"\nseverity = "info"\nmessage = "m"\nrequire = { fact = "torch.cuda", op = "exists" }\n'
     '[[rule]]\nid = "SITE1"\nseverity = "info"\nmessage = "m"\nrequire = { fact = "torch.cuda", op = "exists" }\n',
     "rule SITE1: id used twice"),
    ('title = "x"\n', "unknown top-level key(s) title"),
    ('schema = "gpudoctor.policy/1"\n', "no [[rule]] tables"),
])
def test_file_level_load_errors(tmp_path, run_cli, body, expected):
    path = write_policy(tmp_path, body)
    code, out, err = run_cli("rules", "--policy", path)
    assert code == 2 and err.count("\n") == 1 and expected in err, err


def test_unreadable_policy_file(tmp_path, run_cli):
    code, _, err = run_cli("lint", FIXTURES / "jobs" / "bad.env", "--policy", tmp_path / "nope.toml")
    assert code == 2 and "nope.toml: cannot read" in err


def test_load_policy_raises_policy_error(tmp_path):
    with pytest.raises(PolicyError, match=r"rule #1: missing id"):
        load_policy(str(write_policy(tmp_path, '[[rule]]\nseverity = "info"\n')))


# ------------------------------------------------------------------------------------------------ the sample policy

def test_sample_policy_passes_on_the_healthy_h100_node(run_cli):
    code, out, err = run_cli("check", "--snapshot", HEALTHY, "--policy", SITE, "--format", "json")
    report = json.loads(out)
    assert code == 0, err
    assert not [f for f in report["findings"] if f["rule"].startswith("SITE")]
    assert not [u for u in report["unknown"] if u["rule"].startswith("SITE")]


def test_sample_policy_on_the_k8s_a100_pod(run_cli):
    code, out, _ = run_cli("check", "--snapshot", K8S, "--policy", SITE, "--format", "json", "--select", "SITE")
    findings = {f["rule"]: f for f in json.loads(out)["findings"]}
    assert code == 1
    assert set(findings) == {"SITE001", "SITE003", "SITE004"}  # 8 GPUs and CUDA 12.1 are fine
    assert findings["SITE001"]["message"] == "driver 535.161.08 is older than the site minimum 550"
    assert findings["SITE004"]["message"] == "1 process(es) already hold GPU memory: PIDs 31337"
    assert findings["SITE004"]["severity"] == "error"
    assert findings["SITE003"]["fix"]["env"]["set"] == {"NCCL_IB_HCA": "mlx5"}


@pytest.mark.parametrize("machine,fires", [
    ("t4-cu121.json", {"SITE001", "SITE002", "SITE003"}),
    ("v100x4-cu130.json", {"SITE002", "SITE003", "SITE005"}),
])
def test_sample_policy_on_other_machines(run_cli, machine, fires):
    _, out, _ = run_cli("check", "--snapshot", FIXTURES / "machines" / machine, "--policy", SITE,
                        "--format", "json", "--select", "SITE")
    report = json.loads(out)
    assert {f["rule"] for f in report["findings"]} == fires, report["findings"]


def test_policy_rules_mix_with_the_catalog_and_obey_select_ignore(run_cli):
    _, out, _ = run_cli("check", "--snapshot", K8S, "--policy", SITE, "--format", "json")
    rules = {f["rule"] for f in json.loads(out)["findings"]}
    assert {"SITE001", "SITE004"} <= rules and any(r.startswith("GD") for r in rules)
    _, out, _ = run_cli("check", "--snapshot", K8S, "--policy", SITE, "--format", "json", "--ignore", "SITE00")
    assert not [f for f in json.loads(out)["findings"] if f["rule"].startswith("SITE")]
    _, out, _ = run_cli("check", "--snapshot", K8S, "--policy", SITE, "--format", "json", "--select", "SITE004")
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["SITE004"]


def test_text_report_shows_full_site_ids(run_cli):
    _, out, _ = run_cli("check", "--snapshot", K8S, "--policy", SITE, "--format", "plain", "--select", "SITE")
    assert "SITE001 site-driver-minimum" in out and "SITE…" not in out


def test_fix_applies_safe_policy_fixes(run_cli):
    code, out, _ = run_cli("fix", "--snapshot", K8S, "--policy", SITE, "--select", "SITE")
    assert "NCCL_IB_HCA=mlx5" in out


def test_rules_and_explain_list_policy_rules(run_cli):
    code, out, _ = run_cli("rules", "--policy", SITE, "--format", "json")
    ids = [rule["id"] for rule in json.loads(out)["rules"]]
    assert code == 0 and ids[-5:] == ["SITE001", "SITE002", "SITE003", "SITE004", "SITE005"]
    code, out, _ = run_cli("explain", "site002", "--policy", SITE, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["family"] == "site" and data["needs"] == ["nvml.gpus"]
    assert data["summary"] == "Site policy requires len(nvml.gpus) eq 8"
    code, out, _ = run_cli("explain", "SITE004", "--policy", SITE)
    assert code == 0 and "Counts the compute processes" in out
    code, _, err = run_cli("explain", "SITE004")
    assert code == 2 and "no rule" in err


# ------------------------------------------------------------------------------------------------ docs

@pytest.mark.parametrize("page,least", [("policy.md", 3), ("preflight.md", 1)])
def test_docs_policy_examples_load(tmp_path, page, least):
    """Every ```toml block of docs/policy.md (and docs/preflight.md's) is a policy that loads, and says something."""
    from gpudoctor.policy import load_site

    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert len(blocks) >= least
    for number, block in enumerate(blocks):
        site = load_site(str(write_policy(tmp_path, block, f"doc{number}.toml")))
        assert site.rules or site.preflight


def test_fix_hint_names_the_policy(run_cli):
    """The report's `gpudoctor fix` hint must find the policy's safe fixes too."""
    code, out, _ = run_cli("check", "--snapshot", ROOT / "fixtures/machines/k8s-pod-a100x8.json", "--policy",
                           ROOT / "fixtures/policies/site.toml", "-q")
    hint = " ".join(out.split("Write the safe fixes:", 1)[1].split())
    assert "--policy" in hint and "site.toml" in hint


def test_gd004_knows_a_loaded_policys_rule_ids(run_cli, tmp_path):
    """`ignore[SITE003]` names a real rule when the site policy is loaded, also when --select leaves it out;
    a typo of it (SITE03) is still reported, and without the policy SITE003 names nothing."""
    script = tmp_path / "train.py"
    script.write_text("import os\nx = 1  # gpudoctor: ignore[SITE003]\ny = 2  # gpudoctor: ignore[SITE03]\n")
    policy = FIXTURES / "policies" / "site.toml"

    def gd004_codes(*extra):
        _, out, _ = run_cli("lint", script, "--format", "json", *extra)
        return sorted(f["evidence"]["code"] for f in json.loads(out)["findings"] if f["rule"] == "GD004")

    assert gd004_codes("--policy", policy) == ["SITE03"]
    assert gd004_codes("--policy", policy, "--select", "GD004") == ["SITE03"]
    assert gd004_codes() == ["SITE003", "SITE03"]


# ------------------------------------------------------------------------------------------------ [preflight]
def test_a_policy_may_set_preflight_s_fractions_alone(tmp_path):
    from gpudoctor.policy import load_site

    site = load_site(str(write_policy(tmp_path, "[preflight.gemm]\ndatasheet_fraction = 0.4\n")))
    assert site.rules == () and site.preflight == {"gemm": {"datasheet_fraction": 0.4}}
    assert site.preflight_limits() == {"straggler": {"below_median": 0.5}, "gemm": {"datasheet_fraction": 0.4},
                                       "fabric": {"below_median": 0.5}}
    assert load_policy(str(write_policy(tmp_path, "[preflight.gemm]\ndatasheet_fraction = 1\n"))) == ()


@pytest.mark.parametrize("body,expected", [
    ("[preflight.links]\nbelow_median = 0.5\n", "[preflight.links] is not a table preflight reads (known: fabric, "
                                                "gemm, straggler)"),
    ("[preflight.straggler]\nbelow = 0.5\n", "[preflight.straggler] has no setting 'below' (known: below_median)"),
    ("[preflight.straggler]\nbelow_median = 1.5\n", "below_median = 1.5: give a fraction, 0 < x ≤ 1"),
    ("[preflight.straggler]\nbelow_median = 0\n", "below_median = 0: give a fraction"),
    ("[preflight.straggler]\nbelow_median = true\n", "below_median = True: give a fraction"),
    ("[preflight.straggler]\nbelow_median = nan\n", "below_median = nan: give a fraction"),
    ('[preflight.straggler]\nbelow_median = "half"\n', "below_median = 'half': give a fraction"),
    ("preflight = 3\n", "preflight must be a table"),
    ("[preflight]\n", "no [[rule]] tables (nor [preflight] settings)"),
])
def test_bad_preflight_settings_exit_2_with_one_line(tmp_path, run_cli, body, expected):
    code, out, err = run_cli("preflight", "--policy", write_policy(tmp_path, body))
    assert code == 2 and out == "" and expected in err and len(err.strip().splitlines()) == 1, err
