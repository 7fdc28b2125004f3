"""Every NVML return code, as the probe reads it from a simulated driver (tests/nvmlsim) and as GD506 judges it:
a query the GPU does not support leaves a fact unknown, a GPU hidden by cgroups is left out, and a handle or
identity query failing with any other code is a broken GPU, reported as an error with what the code means and
what to do. Both directions: a healthy node is never drained, a broken GPU never passes the Prolog."""

import re

import nvmlsim
import pytest
from conftest import ROOT

from gpudoctor.catalog import find_rule, load_catalog, select_rules
from gpudoctor.engine import evaluate
from gpudoctor.knowledge import table
from gpudoctor.probes import nvml_child
from gpudoctor.snapshot import Snapshot

GiB = 1024**3
CODES = table("nvml_errors")["error"]
BY_KIND = {entry["kind"]: entry for entry in CODES}
FIXES = find_rule("GD506").docs["fixes"]


def gpu(index: int, **extra) -> dict:
    return {"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{index:08x}-0000-4000-8000-000000000000", "cc": "9.0",
            "minor": index, "memory": {"total": 80 * GiB, "reserved": 0, "used": 0}, **extra}


def gd506(nvml: dict, env=None) -> list:
    report = evaluate(Snapshot(facts={"nvml": nvml, "env": env or {}}), [find_rule("GD506")])
    return list(report.findings)


def test_the_table_names_every_code_nvidia_ml_py_knows_and_the_probe_classifies_alike():
    import pynvml

    named = {getattr(pynvml, name) for name in dir(pynvml) if name.startswith("NVML_ERROR_")}
    assert named <= {entry["code"] for entry in CODES}, "a code nvidia-ml-py names that the table lacks"
    for entry in CODES:
        expected = "hidden" if entry["kind"] in nvml_child.HIDDEN else (
            "unanswered" if entry["kind"] in nvml_child.UNANSWERED else "broken")
        assert entry["class"] == expected, entry["kind"]
        assert ("action" in entry) == (expected == "broken") and entry.get("action", "nvml_reset") in FIXES


@pytest.fixture(scope="module")
def on_handle(tmp_path_factory):
    """A node with one GPU per NVML return code on its handle, GPU 0 healthy."""
    node = {"gpus": [gpu(0)] + [gpu(i + 1, handle_error=entry["code"]) for i, entry in enumerate(CODES)]}
    return nvmlsim.collect(node, tmp_path_factory.mktemp("handle"))


@pytest.fixture(scope="module")
def on_queries(tmp_path_factory):
    """A node with one GPU per NVML return code on every query, GPU 0 healthy."""
    node = {"gpus": [gpu(0)] + [gpu(i + 1, query_error=entry["code"]) for i, entry in enumerate(CODES)]}
    return nvmlsim.collect(node, tmp_path_factory.mktemp("queries"))


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_every_code_on_a_handle(on_handle, kind):
    """Only a GPU the job may not open is spared: any other failing handle is a broken GPU."""
    index = 1 + [entry["kind"] for entry in CODES].index(kind)
    findings = {f.evidence["gpu"]: f for f in gd506(on_handle)}
    assert 0 not in findings, "the healthy GPU passes"
    if BY_KIND[kind]["class"] == "hidden":
        assert index in [g["index"] for g in on_handle["hidden_gpus"]] and index not in findings
        return
    finding = findings[index]
    assert finding.severity.name == "ERROR" and finding.evidence["nvml_error"] == kind
    assert "handle query failed" in finding.message and BY_KIND[kind]["meaning"] in finding.message
    case = "gpu_lost" if kind == "gpu_lost" else BY_KIND[kind].get("action", "nvml_reset")
    assert finding.fix.summary == find_rule("GD506").fix_text(case, {} if case == "gpu_lost" else {"index": index})


@pytest.mark.parametrize("kind", sorted(BY_KIND))
def test_every_code_on_the_identity_queries(on_queries, kind):
    """A query the GPU does not answer leaves its facts unknown (never a broken GPU), and so does one refused once
    the GPU's handle opened (NO_PERMISSION, OPERATING_SYSTEM: the query is refused, not the GPU); a failing name
    query is a broken GPU."""
    index = 1 + [entry["kind"] for entry in CODES].index(kind)
    findings = {f.evidence["gpu"]: f for f in gd506(on_queries)}
    klass = BY_KIND[kind]["class"]
    if klass in ("unanswered", "hidden"):
        listed = next(g for g in on_queries["gpus"] if g["index"] == index)
        assert index not in findings and "error_kind" not in listed and "name" not in listed
        assert index not in [g["index"] for g in on_queries.get("hidden_gpus", [])]
    else:
        assert findings[index].evidence["nvml_error"] == kind and "name query failed" in findings[index].message


def test_broken_gpus_do_not_count_as_cuda_devices(on_handle):
    from gpudoctor.facts.devices import cuda_devices

    assert [d["index"] for d in cuda_devices(on_handle["gpus"])] == [0]


# --- the Prolog's selection on a simulated node, both directions ------------------------------------------

FAILURES = ["unknown", "insufficient_power", "irq_issue", "reset_required", "memory", "corrupted_inforom",
            "gpu_lost"]


def _prolog(node: dict, tmp_path, slurm_gpus: int):
    return nvmlsim.run_prolog(node, tmp_path, {"SLURM_GPUS_ON_NODE": str(slurm_gpus)})


def test_prolog_drains_a_node_with_a_gpu_in_each_failure_state(tmp_path):
    """GPU 0 healthy, GPU 1 hidden by the job's cgroup, then one GPU per failing code: the node is drained with
    the first broken GPU's meaning as the reason, and every broken GPU is reported, each with its code."""
    gpus = [gpu(0), gpu(1, handle_error="no_permission")]
    for number, kind in enumerate(FAILURES, start=2):
        gpus.append(gpu(number, **{("handle_error" if number % 2 else "query_error"): kind}))
    done, calls, report = _prolog({"gpus": gpus}, tmp_path, slurm_gpus=len(gpus) - 1)
    assert done.returncode == 1, done.stderr
    reason = next(call for call in calls if call.startswith("reason="))
    assert reason.startswith("reason=gpudoctor GD506: GPU 2") and "internal driver error" in reason, reason
    assert "state=drain" in calls and "nodename=gpu-node-7" in calls
    gd506 = [f["evidence"] for f in report["findings"] if f["rule"] == "GD506"]
    assert {e["gpu"]: e["nvml_error"] for e in gd506 if "gpu" in e} == dict(enumerate(FAILURES, start=2))
    assert {"expected": 8, "seen": 1, "broken": 7} in gd506, "8 allocated, 1 working: the broken ones are not seen"


def test_prolog_passes_a_healthy_node_with_a_hidden_gpu_and_unsupported_queries(tmp_path):
    """A GPU hidden by cgroups and a GPU without ECC, remapping or NVLink (NOT_SUPPORTED) are a healthy node."""
    gpus = [gpu(0, ecc={"enabled": True, "volatile": 0, "aggregate": 0}, remapped_rows=[0, 0, 0, 0]),
            gpu(1), gpu(2, handle_error="no_permission"), gpu(3, handle_error="operating_system")]
    done, calls, report = _prolog({"gpus": gpus}, tmp_path, slurm_gpus=2)
    assert done.returncode == 0, done.stderr
    assert calls == [] and report["findings"] == [] and "GD506" in report["passed"]


def test_a_mig_parent_whose_process_list_is_refused_is_healthy(tmp_path):
    """In MIG mode a user who is not root gets NO_PERMISSION on the parent GPU's process list: an optional query,
    so the GPU is healthy and its MIG devices' processes are still read."""
    node = nvmlsim.load_node("a100x8_lost_mig")
    node["gpus"][7]["fails"] = {"processes": "no_permission"}
    facts = nvmlsim.collect(node, tmp_path)
    parent = facts["gpus"][7]
    assert "processes" not in parent and "error_kind" not in parent
    assert parent["mig_devices"][2]["processes"] == [{"pid": 4190002, "name": None, "used_bytes": None}]
    assert [f.evidence["gpu"] for f in gd506(facts)] == [5], "only the lost GPU"


# --- GD506's GPU count: a broken GPU is not a GPU the job has ------------------------------------------------

@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    """Eight H100s as NVML lists them: all healthy, and the same node with GPU 3's handle failing (UNKNOWN)."""
    healthy = nvmlsim.collect({"gpus": [gpu(i) for i in range(8)]}, tmp_path_factory.mktemp("healthy"))
    broken = nvmlsim.collect({"gpus": [gpu(i, handle_error="unknown" if i == 3 else None) for i in range(8)]},
                             tmp_path_factory.mktemp("broken"))
    return healthy, broken


def _count_findings(findings: list) -> list:
    return [f for f in findings if "expected" in f.evidence]


def test_a_broken_gpu_is_not_counted_as_one_slurm_allocated(eight):
    """8 allocated, 8 listed, one of them broken: the job has 7 GPUs, not '8 seen, fine'."""
    _healthy, broken = eight
    findings = gd506(broken, {"SLURM_GPUS_ON_NODE": "8"})
    assert [f.evidence["gpu"] for f in findings if "gpu" in f.evidence] == [3]
    (count,) = _count_findings(findings)
    assert count.evidence == {"expected": 8, "seen": 7, "broken": 1}
    assert "sees 7 working (8 listed, 1 broken)" in count.message
    assert _count_findings(gd506(broken, {"SLURM_GPUS_ON_NODE": "7"})) == [], "7 allocated, 7 working"


def test_a_healthy_node_is_never_short_of_gpus(eight):
    healthy, _broken = eight
    for allocated in ("8", "4", "1"):
        assert gd506(healthy, {"SLURM_GPUS_ON_NODE": allocated}) == []
    (count,) = _count_findings(gd506(healthy, {"SLURM_GPUS_ON_NODE": "9"}))
    assert count.evidence == {"expected": 9, "seen": 8, "broken": 0} and "NVML sees 8:" in count.message


# --- the Prolog's rules on a node where the job's cgroup hides GPUs (in-process) -----------------------------------

PROLOG_SELECT = re.search(r"GPUDOCTOR_SELECT=\$\{GPUDOCTOR_SELECT-([^}]*)\}",
                          (ROOT / "deploy" / "slurm" / "prolog.sh").read_text()).group(1).split(",")


def prolog_errors(nvml: dict, env: dict) -> list:
    """What the Prolog drains for: the findings at error severity of its default rule selection."""
    rules = select_rules(load_catalog(), PROLOG_SELECT)
    report = evaluate(Snapshot(facts={"nvml": nvml, "env": env}), rules)
    return [f for f in report.findings if f.severity.name == "ERROR"]


@pytest.fixture(scope="module")
def constrained(tmp_path_factory):
    """Eight GPUs; ConstrainDevices lets the job open GPUs 5 and 6 only (minor numbers 5, 6)."""
    gpus = [gpu(i, handle_error=None if i in (5, 6) else "no_permission") for i in range(8)]
    healthy = nvmlsim.collect({"gpus": gpus}, tmp_path_factory.mktemp("constrained"))
    gpus[6]["handle_error"] = "insufficient_power"
    broken = nvmlsim.collect({"gpus": gpus}, tmp_path_factory.mktemp("constrained_broken"))
    return healthy, broken


def test_prolog_passes_a_job_whose_other_gpus_are_hidden(constrained):
    """SLURM_GPUS_ON_NODE=2, the job's two GPUs open and healthy, the other six hidden: fine."""
    healthy, _broken = constrained
    assert PROLOG_SELECT == ["GD105", "GD5"]
    assert [g["index"] for g in healthy["gpus"]] == [5, 6] and len(healthy["hidden_gpus"]) == 6
    for env in ({"SLURM_GPUS_ON_NODE": "2"}, {"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "5,6"}):
        assert prolog_errors(healthy, env) == []


def test_prolog_drains_when_the_job_gets_fewer_gpus_than_slurm_allocated(constrained):
    """Three GPUs allocated while the job may open two: one SLURM gave it is hidden from it or missing. A job step
    says so in SLURM_GPUS_ON_NODE, a Prolog only by the GPU IDs (SLURM_JOB_GPUS: a real Prolog's environment has
    no SLURM_GPUS_ON_NODE, tests/test_slurm_hook.py)."""
    healthy, _broken = constrained
    for variable, value in (("SLURM_GPUS_ON_NODE", "3"), ("SLURM_JOB_GPUS", "4,5,6")):
        (finding,) = prolog_errors(healthy, {variable: value})
        assert finding.rule == "GD506" and finding.evidence == {"expected": 3, "seen": 2, "broken": 0}
        assert f"SLURM allocated 3 GPUs on this node ({variable}={value}) but NVML sees 2:" in finding.message


def test_prolog_drains_a_broken_gpu_among_the_jobs_own(constrained):
    """One of the job's two GPUs answers INSUFFICIENT_POWER: drained with that GPU and its code first; the six
    hidden GPUs are neither broken nor counted."""
    _healthy, broken = constrained
    findings = prolog_errors(broken, {"SLURM_GPUS_ON_NODE": "2", "SLURM_JOB_GPUS": "5,6"})
    assert [(f.rule, f.evidence.get("gpu"), f.evidence.get("nvml_error")) for f in findings] == [
        ("GD506", 6, "insufficient_power"), ("GD506", None, None)]
    assert findings[1].evidence == {"expected": 2, "seen": 1, "broken": 1}
    assert BY_KIND["insufficient_power"]["meaning"] in findings[0].message
