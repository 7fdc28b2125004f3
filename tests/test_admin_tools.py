"""The administrators' tools in deploy/, run the way each tool runs them: the NHC check sourced into bash with NHC's
own die/log convention, the node-problem-detector plugin config validated and its rule executed as NPD executes it,
and the Dockerfile checked with gpudoctor's own lint, hadolint's main rules and a build of its first stage's files."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml
from conftest import FIXTURES, ROOT, cli_in_process

DEPLOY = ROOT / "deploy"
BAD = FIXTURES / "machines" / "k8s-pod-a100x8.json"  # /dev/shm 64 MiB (GD503), a GPU with ECC errors (GD506)
HEALTHY = FIXTURES / "machines" / "h100x8-healthy.json"
GPUDOCTOR = f"env PYTHONPATH={ROOT} {sys.executable} -m gpudoctor"

# NHC's driver defines die (the check failed: its message is the node's offline reason) and log; a check function
# is called with the arguments of its nhc.conf line and returns 0 or 1 (nhc, scripts/lbnl_*.nhc).
NHC_HARNESS = r"""
CHECK_DIED=0; DIED_WITH=""
function die() { local RET="$1"; shift; CHECK_DIED=1; DIED_WITH="$*"; echo "ERROR:  nhc:  Health check failed:  $*"; }
function log() { echo "LOG: $*"; }
function dbg() { :; }
. "$1"; shift
check_gpudoctor "$@"
echo "RETURNED=$? DIED=$CHECK_DIED"
"""


def nhc(*args, gpudoctor=GPUDOCTOR):
    result = subprocess.run(["bash", "-c", NHC_HARNESS, "nhc", str(DEPLOY / "slurm" / "nhc" / "gpudoctor.nhc"), *args],
                            capture_output=True, text=True, timeout=120, env={"PATH": "/usr/bin:/bin",
                                                                              "GPUDOCTOR": gpudoctor})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_nhc_fails_a_bad_node_with_gpudoctors_reason():
    out = nhc("-a", f"--snapshot {BAD}")
    assert "RETURNED=1 DIED=1" in out
    assert "Health check failed:  gpudoctor GD503: /dev/shm is 64 MiB" in out and "[also GD506]" in out
    assert "GD502" not in out  # a warning: below the default level
    assert "GD502" in nhc("-f", "warning", "-a", f"--snapshot {BAD}")


def test_nhc_passes_a_healthy_node_and_honours_the_selection():
    assert "RETURNED=0 DIED=0" in nhc("-a", f"--snapshot {HEALTHY}")
    assert "RETURNED=0 DIED=0" in nhc("-s", "GD105", "-a", f"--snapshot {BAD}")  # neither /dev/shm nor ECC


@pytest.mark.parametrize("args,gpudoctor,says", [
    (("-a", "--snapshot /no/such.json"), GPUDOCTOR, "exited 2"),
    (("-s", "GX9",), GPUDOCTOR, "exited 2"),
    ((), "/no/such/gpudoctor", "not found"),
])
def test_nhc_never_fails_a_node_for_gpudoctors_own_trouble(args, gpudoctor, says):
    out = nhc(*args, gpudoctor=gpudoctor)
    assert "RETURNED=0 DIED=0" in out and says in out


def test_nhc_check_is_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed")
    done = subprocess.run(["shellcheck", "-s", "bash", str(DEPLOY / "slurm" / "nhc" / "gpudoctor.nhc")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# ------------------------------------------------------------------------------------------ node-problem-detector

NPD = DEPLOY / "kubernetes" / "node-problem-detector" / "gpudoctor-plugin-monitor.json"
NPD_STATUS = {0: "OK", 1: "NonOK"}  # anything else: Unknown (pkg/custompluginmonitor/plugin/plugin.go)


def seconds(text: str) -> float:
    return sum(float(n) * {"s": 1, "m": 60, "h": 3600}[unit] for n, unit in re.findall(r"(\d+(?:\.\d+)?)([smh])", text))


def test_the_npd_config_passes_npds_own_validation():
    config = json.loads(NPD.read_text())
    plugin = config["pluginConfig"]
    assert config["plugin"] == "custom" and seconds(plugin["invoke_interval"]) > 0
    defaults = {condition["type"] for condition in config["conditions"]}
    for rule in config["rules"]:
        assert seconds(rule["timeout"]) <= seconds(plugin["timeout"])
        assert rule["type"] != "permanent" or rule["condition"] in defaults
        assert rule["path"] == "/usr/local/bin/gpudoctor"  # where deploy/Dockerfile's image installs it


def npd_run(rule, plugin, tmp_path, snapshot):
    """One rule as NPD runs it: path and args, stdout trimmed and cut at max_output_length, exit status mapped."""
    shim = tmp_path / "gpudoctor"  # the image's /usr/local/bin/gpudoctor, replaying a recorded node
    shim.write_text(f"#!/bin/sh\nexec {GPUDOCTOR} \"$@\" --snapshot {shlex.quote(str(snapshot))}\n")
    shim.chmod(0o755)
    done = subprocess.run([str(shim), *rule["args"]], capture_output=True, text=True,
                          timeout=min(seconds(rule["timeout"]), seconds(plugin["timeout"])))
    return NPD_STATUS.get(done.returncode, "Unknown"), done.stdout.strip()[:plugin["max_output_length"]]


def test_the_npd_rule_reports_a_bad_node_as_nonok_with_gpudoctors_reason(tmp_path):
    config = json.loads(NPD.read_text())
    (rule,) = config["rules"]
    status, message = npd_run(rule, config["pluginConfig"], tmp_path, BAD)
    assert status == "NonOK" and message.startswith("gpudoctor GD503: /dev/shm is 64 MiB"), message
    assert npd_run(rule, config["pluginConfig"], tmp_path, HEALTHY) == ("OK", "")
    assert npd_run(rule, config["pluginConfig"], tmp_path, tmp_path / "missing.json")[0] == "Unknown"


# ------------------------------------------------------------------------------------------------- the Dockerfile

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions():
    lines = re.sub(r"\\\n", " ", DOCKERFILE.read_text()).splitlines()
    return [line.split(None, 1) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def test_the_dockerfile_passes_gpudoctors_lint_and_hadolints_main_rules():
    result = cli_in_process("lint", str(DOCKERFILE), "--format", "json")
    assert result.returncode == 0 and json.loads(result.stdout)["findings"] == [], result.stdout
    for word, rest in instructions():
        if word == "FROM":  # DL3006/DL3007: a tagged image, never latest
            image = rest.split()[0]
            assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), image
        assert word != "ADD"  # DL3020: COPY for files
        if word == "RUN" and "pip " in rest:
            assert "--no-cache-dir" in rest  # DL3042
        if word in ("CMD", "ENTRYPOINT"):
            json.loads(rest)  # DL3025: the exec form


def test_the_manifests_use_the_image_the_dockerfile_builds():
    (tag,) = re.findall(r"docker build -f deploy/Dockerfile -t (\S+) \.", DOCKERFILE.read_text())
    images = {container["image"] for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "node-check.yaml").read_text())
              if doc and doc["kind"] == "DaemonSet" for container in doc["spec"]["template"]["spec"]["containers"]}
    assert images == {tag}
    assert f"COPY --from={tag} /opt/gpudoctor/wheels" in DOCKERFILE.read_text()


@pytest.mark.slow
def test_the_first_stage_builds_the_wheel_from_the_files_it_copies(tmp_path):
    """What `docker build` would do in the first stage, without a daemon: only the files COPY brings in, then the
    wheel build; a wheel that lacks the rules or the schemas fails here."""
    context = tmp_path / "src"  # the stage's WORKDIR
    context.mkdir()
    stages = 0
    for word, rest in instructions():
        stages += word == "FROM"
        if stages > 1:
            break
        if word == "COPY":
            *sources, target = rest.split()
            destination = context / target
            for source in sources:
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, destination)
                else:
                    destination.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / source, destination / source)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "wheels"),
                    str(context)], check=True, capture_output=True, timeout=300)
    wheel = next((tmp_path / "wheels").glob("gpudoctor-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "gpudoctor/_rules/facts.toml" in names and "gpudoctor/_schemas/report.schema.json" in names
