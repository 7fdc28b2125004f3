"""action.yml, the GitHub Action: its lint step run as the runner runs a composite step's script (bash -eo pipefail,
inputs through the environment, outputs through $GITHUB_OUTPUT), the SARIF it writes valid for upload-sarif, and its
scripts shellcheck-clean."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import ROOT, required_or_skip

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS = {step.get("id") or step.get("name"): step for step in ACTION["runs"]["steps"]}


def run_lint_step(tmp_path, paths, fail_on="error"):
    output = tmp_path / "github_output"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "RUNNER_TEMP": str(tmp_path),
           "GITHUB_OUTPUT": str(output), "GPUDOCTOR_PATHS": paths, "GPUDOCTOR_ARGS": "",
           "GPUDOCTOR_FAIL_ON": fail_on, "PYTHONPATH": str(ROOT)}
    if not shutil.which("gpudoctor", path=env["PATH"]):
        pytest.skip("no gpudoctor command beside this interpreter (pip install -e .)")
    script = tmp_path / "step.sh"
    script.write_text(STEPS["lint"]["run"])
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done, outputs


def test_the_lint_step_writes_sarif_and_records_the_status(tmp_path):
    done, outputs = run_lint_step(tmp_path, "fixtures/jobs/bad_job.sh fixtures/ds_configs/zero2_offload.json")
    assert done.returncode == 0, done.stderr  # the upload comes first; a later step fails the job
    assert outputs["status"] == "1" and "GD402" in done.stdout  # the findings in the log as text too
    sarif = json.loads(Path(outputs["sarif"]).read_text())
    schema = json.loads((ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(sarif)
    assert {result["ruleId"] for result in sarif["runs"][0]["results"]} >= {"GD304", "GD402"}
    clean, outputs = run_lint_step(tmp_path, "fixtures/ds_configs/zero3_offload.json")
    assert clean.returncode == 0 and outputs["status"] == "0"


def test_the_steps_upload_then_fail():
    names = list(STEPS)
    upload, fail = STEPS["Upload to code scanning"], STEPS["Fail on findings at or above fail-on"]
    assert names.index("lint") < names.index("Upload to code scanning") < names.index(
        "Fail on findings at or above fail-on")
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "${{ steps.lint.outputs.sarif }}" and "always()" in upload["if"]
    assert ACTION["runs"]["using"] == "composite" and set(ACTION["inputs"]) == {
        "paths", "args", "fail-on", "upload", "python-version"}
    assert "$GITHUB_ACTION_PATH" in STEPS["Install gpudoctor"]["run"]  # this repository, at the ref the user chose
    assert "${{" not in STEPS["lint"]["run"]  # inputs reach the script through the environment, never inlined
    assert fail["if"] == "${{ steps.lint.outputs.status != '0' }}"


def test_the_scripts_are_shellcheck_clean(tmp_path):
    if shutil.which("shellcheck") is None:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", "shellcheck not installed (apt-get install shellcheck)")
    for name, step in STEPS.items():
        if "run" in step:
            script = tmp_path / "step.sh"
            script.write_text("#!/bin/bash\n" + re.sub(r"\$\{\{[^}]*\}\}", "X", step["run"]))
            done = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
            assert done.returncode == 0, (name, done.stdout)


def test_the_docs_workflow_uses_the_actions_inputs():
    page = (ROOT / "docs" / "ci.md").read_text()
    (workflow,) = re.findall(r"```yaml\n(# \.github/workflows/.*?)```", page, re.S)
    (step,) = [s for s in yaml.safe_load(workflow)["jobs"]["lint"]["steps"] if "gpudoctor" in s.get("uses", "")]
    assert set(step["with"]) <= set(ACTION["inputs"])
    assert yaml.safe_load(workflow)["permissions"]["security-events"] == "write"
    assert os.path.basename(ACTION["runs"]["steps"][0]["uses"]).startswith("setup-python@")
