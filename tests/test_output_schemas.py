"""Every JSON document gpudoctor writes validates against its published JSON Schema (docs/schemas/), recorded
examples and live outputs alike; `--format sarif` validates against the SARIF 2.1.0 schema, and `--format junit`
reads as CI systems read it."""

import json

import jsonschema
import pytest
from conftest import FIXTURES, ROOT, cli_in_process
from junitparser import Failure, JUnitXml, Skipped

from gpudoctor.data import schemas_dir
from gpudoctor.schema import json_schema

SCHEMAS = ROOT / "docs" / "schemas"
OUTPUTS = FIXTURES / "outputs"
SARIF_SCHEMA = ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json"
DOCUMENTS = {  # the `schema` field of a document → its JSON Schema file
    "gpudoctor.report/1": "report", "gpudoctor.fleet/1": "fleet", "gpudoctor.snapshot/1": "snapshot",
    "gpudoctor.bench.nccl/1": "bench-nccl", "gpudoctor.bench.train/1": "bench-train",
    "gpudoctor.estimate/1": "estimate", "gpudoctor.rules/1": "rules", "gpudoctor.preflight/1": "preflight",
}


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def assert_valid(document: dict) -> None:
    errors = list(validator(DOCUMENTS[document["schema"]]).iter_errors(document))
    assert not errors, [(list(error.absolute_path), error.message[:200]) for error in errors[:5]]


def test_every_schema_is_a_valid_json_schema_and_every_document_has_one():
    files = sorted(path.stem.replace(".schema", "") for path in SCHEMAS.glob("*.schema.json"))
    assert files == sorted(DOCUMENTS.values())
    for name in files:
        jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))
    assert schemas_dir() == SCHEMAS


def test_the_snapshot_schema_is_generated_from_the_fact_schema():
    written = json.loads((SCHEMAS / "snapshot.schema.json").read_text())
    assert written == json_schema(), "python -m gpudoctor.schema --json-schema > docs/schemas/snapshot.schema.json"


@pytest.mark.parametrize("path", sorted(OUTPUTS.glob("*.json")) + sorted((FIXTURES / "machines").glob("*.json"))
                         + sorted((FIXTURES / "fleet").glob("*.json")), ids=lambda path: path.name)
def test_recorded_documents_validate(path):
    assert_valid(json.loads(path.read_text()))


@pytest.mark.parametrize("args", [
    ("lint", "fixtures/jobs", "fixtures/ds_configs", "fixtures/launch"),
    ("check", "--snapshot", "fixtures/machines/a100x8-lost-gpu.json", "--script", "fixtures/launch/ds_cifar.py"),
    ("check", "--from", "fixtures/reports/collect_env_rtx3090_driver470_cu121.txt"),
    ("fleet", "fixtures/fleet/dgx-01.json", "fixtures/fleet/dgx-03.json"),
    ("estimate", "--model", "fixtures/models/qwen2.5-0.5b.config.json", "--gpu", "4090"),
    ("rules",),
], ids=lambda args: args[0] + " " + (args[1] if len(args) > 1 else ""))
def test_live_documents_validate(args):
    result = cli_in_process(*args, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    assert_valid(json.loads(result.stdout))


@pytest.mark.parametrize("args", [
    ("--from", "fixtures/reports/collect_env_rtx3090_driver470_cu121.txt"),
    ("--from", "fixtures/logs/nccl_ib_healthy_2nodes.log"),
    ("--quick", "--timeout", "10"),  # this machine, live
], ids=lambda args: args[1])
def test_snapshots_validate(args):
    result = cli_in_process("snapshot", *args)
    assert result.returncode in (0, 1), result.stderr
    assert_valid(json.loads(result.stdout))


def test_the_schemas_refuse_what_gpudoctor_never_writes():
    report = json.loads((OUTPUTS / "report-lint.json").read_text())
    report["findings"][0]["severity"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        validator("report").validate(report)
    snapshot = json.loads((FIXTURES / "machines" / "h100x8-healthy.json").read_text())
    snapshot["facts"]["nvml"]["gpus"][0]["memory_total_bytes"] = "80 GB"
    with pytest.raises(jsonschema.ValidationError, match="80 GB"):
        validator("snapshot").validate(snapshot)
    snapshot["facts"]["nvml"]["gpus"][0] = {"name": "x", "not_a_fact": 1}
    with pytest.raises(jsonschema.ValidationError, match="not_a_fact"):
        validator("snapshot").validate(snapshot)
    preflight = json.loads((OUTPUTS / "preflight-gloo-3nodes-rank-killed.json").read_text())
    validator("preflight").validate(preflight)
    preflight["phases"][3]["status"] = "crashed"
    with pytest.raises(jsonschema.ValidationError, match="crashed"):
        validator("preflight").validate(preflight)
    preflight = json.loads((OUTPUTS / "preflight-gloo-3nodes-good.json").read_text())
    preflight["limits"]["straggler"]["below_median"] = 2
    with pytest.raises(jsonschema.ValidationError, match="2 is greater than the maximum"):
        validator("preflight").validate(preflight)


# ----------------------------------------------------------------------------------------------------- SARIF

def sarif(*paths, cwd=ROOT) -> dict:
    result = cli_in_process("lint", *paths, "--format", "sarif", cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_sarif_validates_against_the_sarif_2_1_0_schema():
    document = sarif("fixtures/jobs", "fixtures/ds_configs", "fixtures/launch")
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(document)
    run = document["runs"][0]
    assert document["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "gpudoctor"
    assert len(run["results"]) >= 10
    for result in run["results"]:  # code scanning refuses a result without a location
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("fixtures/")


def test_sarif_rules_levels_and_regions_come_from_the_catalog_and_the_findings():
    run = sarif("fixtures/jobs/bad_job.sh", "fixtures/ds_configs/zero2_offload.json")["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    by_rule = {result["ruleId"]: result for result in run["results"]}
    assert {"GD003", "GD304", "GD309", "GD402", "GD410"} <= set(by_rule)
    offload = by_rule["GD304"]
    assert [offload["level"], by_rule["GD309"]["level"], by_rule["GD402"]["level"]] == ["warning", "note", "error"]
    assert offload["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "fixtures/ds_configs/zero2_offload.json", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 22}}
    rule = rules[offload["ruleIndex"]]
    assert rule["id"] == "GD304" and rule["name"] == "ds-offload-param-needs-zero3"
    assert rule["shortDescription"]["text"].startswith("A DeepSpeed config sets offload_param")
    assert rule["defaultConfiguration"]["level"] == "warning" and "gpudoctor explain GD304" in rule["help"]["text"]
    assert len({result["partialFingerprints"]["gpudoctor/v1"] for result in run["results"]}) == len(run["results"])


def test_sarif_fingerprints_stay_when_lines_move_and_change_with_the_finding(tmp_path):
    job = (FIXTURES / "jobs" / "bad_job.sh").read_text()
    (tmp_path / "job.sh").write_text(job)
    before = sarif("job.sh", cwd=tmp_path)["runs"][0]["results"]
    lines = job.splitlines(keepends=True)
    (tmp_path / "job.sh").write_text(lines[0] + "# a comment\n# another\n" + "".join(lines[1:]))
    after = sarif("job.sh", cwd=tmp_path)["runs"][0]["results"]
    assert [r["locations"][0]["physicalLocation"]["region"]["startLine"] + 2 for r in before] == \
        [r["locations"][0]["physicalLocation"]["region"]["startLine"] for r in after]
    assert [r["partialFingerprints"] for r in before] == [r["partialFingerprints"] for r in after]
    (tmp_path / "job.sh").write_text(job.replace("NCCL_P2P_LEVEL='nvl'", "NCCL_P2P_LEVEL='pix'"))
    changed = sarif("job.sh", cwd=tmp_path)["runs"][0]["results"]
    prints = [{r["partialFingerprints"]["gpudoctor/v1"] for r in results} for results in (before, changed)]
    assert len(prints[0] - prints[1]) == 1 and len(prints[0] & prints[1]) == len(before) - 1  # the one that changed


def test_sarif_of_a_clean_file_has_no_results_and_still_validates():
    document = sarif("fixtures/ds_configs/zero3_offload.json")
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(document)
    assert document["runs"][0]["results"] == []


# ----------------------------------------------------------------------------------------------------- JUnit

def test_junit_reads_as_ci_systems_read_it(tmp_path):
    out = tmp_path / "gpudoctor.xml"
    result = cli_in_process("lint", "fixtures/jobs/bad_job.sh", "fixtures/ds_configs/zero2_offload.json",
                            "--format", "junit", "--output", str(out))
    assert result.returncode == 1, result.stderr
    report = json.loads(cli_in_process("lint", "fixtures/jobs/bad_job.sh", "fixtures/ds_configs/zero2_offload.json",
                                       "--format", "json").stdout)
    xml = JUnitXml.fromfile(str(out))
    (suite,) = list(xml)
    cases = list(suite)
    failed = [case for case in cases if any(isinstance(r, Failure) for r in case.result)]
    skipped = [case for case in cases if any(isinstance(r, Skipped) for r in case.result)]
    summary = report["summary"]
    assert len(failed) == suite.failures == summary["error"] + summary["warning"] + summary["info"]
    assert len(skipped) == suite.skipped == summary["unknown"] + summary["not_applicable"]
    assert suite.tests == len(cases) == len(failed) + len(skipped) + summary["passed"]
    offload = next(case for case in failed if case.name.startswith("GD304"))
    assert offload.classname == "fixtures/ds_configs/zero2_offload.json" and "zero2_offload.json:22" in offload.name
    assert offload.result[0].type == "warning" and "ZeRO stage 2" in offload.result[0].message


def test_junit_escapes_control_characters_that_xml_cannot_hold(tmp_path):
    (tmp_path / "job.env").write_text("NCCL_P2P_LEVEL=nvl\x1b[31m\n")
    result = cli_in_process("lint", "job.env", "--format", "junit", cwd=tmp_path)
    assert "\x1b" not in result.stdout
    (tmp_path / "out.xml").write_text(result.stdout)
    assert JUnitXml.fromfile(str(tmp_path / "out.xml")).failures >= 1

