"""Real GPU node states, each read by the real NVML probe from a simulated driver (tests/nvmlsim) and judged by the
Slurm Prolog's selection (deploy/slurm/prolog.sh: `check --select GD105,GD5`): a MIG device given to a container or
a Slurm job, MIG mode on without instances, a pending MIG mode, an NVSwitch node whose fabric manager is down, and
GPUs whose minor numbers are not in PCI order."""

import nvmlsim
import pytest

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.facts.devices import job_gpus
from gpudoctor.snapshot import Snapshot

GiB = 1024**3
MiB = 1024**2
PARENT = "GPU-7a3c1e2f-0b4d-4c6e-9f10-2a3b4c5d6e70"
MIG_1G = "MIG-1e2d3c4b-5a69-5788-9a0b-1c2d3e4f5a61"


def run(rule_id: str, facts: dict, env=None, **groups) -> list:
    report = evaluate(Snapshot(facts={"nvml": facts, "env": env or {}, **groups}), [find_rule(rule_id)])
    return list(report.findings)


def h100(index: int, **extra) -> dict:
    return {"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{index:08x}-1111-4222-8333-444444444444", "cc": "9.0",
            "minor": index, "pci_bus_id": f"00000000:{0x18 + 16 * index:02X}:00.0",
            "memory": {"total": 80 * GiB, "reserved": 512 * MiB, "used": 0}, **extra}


def mig_slice_node() -> dict:
    """A container (or a Slurm job with ConstrainDevices) given one 1g.10gb MIG device of an A100: the parent GPU's
    handle opens, but its memory and process list answer NO_PERMISSION (nvml.h: "In MIG mode, if device handle is
    provided, the API returns aggregate information, only if the caller has appropriate privileges"), and the other
    MIG devices' handles too."""
    other = {"name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "uuid": "MIG-00000000-0000-5000-8000-000000000001",
             "gi": 1, "ci": 0, "sm_count": 42, "gi_slices": 3, "ci_slices": 3, "handle_error": "no_permission"}
    mine = {"slot": 1, "name": "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "uuid": MIG_1G, "gi": 9, "ci": 0,
            "sm_count": 14, "gi_slices": 1, "ci_slices": 1, "memory": {"total": 9728 * MiB, "used": 0}}
    parent = {"name": "NVIDIA A100-SXM4-80GB", "uuid": PARENT, "cc": "8.0", "minor": 0,
              "memory": {"total": 80 * GiB, "reserved": 0, "used": 0},
              "fails": {"memory": "no_permission", "processes": "no_permission"},
              "mig": {"enabled": True, "max_devices": 7, "devices": [dict(other, slot=0), mine]}}
    return {"driver_version": "550.90.07", "cuda_version": 12040, "gpus": [parent]}


# --- 1. a MIG device in a container or a Slurm job ------------------------------------------------------------

def test_a_mig_device_given_to_a_container_is_its_gpu_not_a_hidden_one(tmp_path):
    """The parent's refused memory is unanswered, not a hidden GPU: the GPU is listed with the MIG device this
    process may open, and the ones it may not are counted apart (never taken for a GPU without instances)."""
    facts = nvmlsim.collect(mig_slice_node(), tmp_path)
    assert "hidden_gpus" not in facts
    (gpu,) = facts["gpus"]
    assert gpu["uuid"] == PARENT and "error_kind" not in gpu and "memory_total_bytes" not in gpu
    assert [m["uuid"] for m in gpu["mig_devices"]] == [MIG_1G] and gpu["mig_devices_hidden"] == 1
    assert [d["uuid"] for d in job_gpus(Facts({"nvml": facts, "env": {}})).devices] == [MIG_1G]
    assert run("GD506", facts, {"SLURM_GPUS_ON_NODE": "1"}) == []


def test_the_prolog_passes_a_node_whose_job_got_a_mig_device(tmp_path):
    done, calls, report = nvmlsim.run_prolog(mig_slice_node(), tmp_path, {"SLURM_JOB_GPUS": "0"})
    assert done.returncode == 0, done.stderr
    assert calls == [] and report["findings"] == [] and "GD506" in report["passed"]


# --- 2. MIG mode on, no instance; a pending MIG mode -------------------------------------------------------------

def mig_without_instances() -> dict:
    """After a reboot without nvidia-mig-manager: MIG mode stays on, the GPU and compute instances are gone."""
    return {"driver_version": "550.90.07", "gpus": [h100(0, mig={"enabled": True, "max_devices": 7}), h100(1)]}


def test_mig_mode_without_instances_is_no_cuda_device(tmp_path):
    facts = nvmlsim.collect(mig_without_instances(), tmp_path)
    assert facts["gpus"][0]["mig_enabled"] is True and facts["gpus"][0]["mig_devices"] == []
    assert [d["index"] for d in job_gpus(Facts({"nvml": facts, "env": {}})).devices] == [1]
    (finding,) = run("GD506", facts, {"SLURM_GPUS_ON_NODE": "1"})
    assert finding.evidence["gpu"] == 0 and "no MIG instance: CUDA sees no device" in finding.message
    assert "nvidia-smi mig" in finding.fix.summary and finding.severity.name == "ERROR"
    counted = run("GD506", facts, {"SLURM_GPUS_ON_NODE": "2"})
    assert {"expected": 2, "seen": 1, "broken": 0} in [f.evidence for f in counted], "the MIG GPU counts no device"


def test_the_prolog_drains_a_node_whose_mig_gpu_lost_its_instances(tmp_path):
    done, calls, _report = nvmlsim.run_prolog(mig_without_instances(), tmp_path, {"SLURM_JOB_GPUS": "0,1"})
    assert done.returncode == 1, done.stderr
    assert "state=drain" in calls and any("MIG mode is on" in call for call in calls if call.startswith("reason="))


def test_a_pending_mig_mode_is_a_warning_not_a_drain(tmp_path):
    node = {"gpus": [h100(0, mig={"enabled": False, "pending": True, "max_devices": 7})]}
    facts = nvmlsim.collect(node, tmp_path)
    assert facts["gpus"][0]["mig_pending"] is True
    (finding,) = run("GD506", facts)
    assert finding.severity.name == "WARNING" and "turn on at the next GPU reset" in finding.message
    done, calls, _report = nvmlsim.run_prolog(node, tmp_path / "prolog", {"SLURM_JOB_GPUS": "0"})
    assert done.returncode == 0 and calls == [], done.stderr


# --- 3. the fabric manager ------------------------------------------------------------------------------------

def hgx(state: str, status: str = "success") -> dict:
    """An HGX H100 (NVSwitch): NVML's fabric state per GPU, nvmlDeviceGetGpuFabricInfoV."""
    return {"driver_version": "550.90.07", "cuda_version": 12040,
            "gpus": [h100(i, fabric={"state": state, "status": status}, nvlink={"links": 18}) for i in range(8)]}


@pytest.mark.parametrize("state, status, drained", [("not_started", "success", True),
                                                    ("completed", "unknown", True),
                                                    ("completed", "success", False)])
def test_the_prolog_reads_the_fabric_state(tmp_path, state, status, drained):
    """Fabric manager down: NVML reports the GPUs outside the NVLink fabric and the Prolog drains the node (every
    CUDA program there fails with error 802); registered: the node passes."""
    done, calls, report = nvmlsim.run_prolog(hgx(state, status), tmp_path, {"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"})
    assert done.returncode == (1 if drained else 0), done.stderr
    gd105 = [f for f in report["findings"] if f["rule"] == "GD105"]
    if drained:
        assert "state=drain" in calls and len(gd105) == 1 and "fabric manager" in gd105[0]["message"]
        assert gd105[0]["evidence"]["gpus"] == list(range(8))
    else:
        assert calls == [] and gd105 == [] and "GD105" in report["passed"]


TORCH_802 = {"status": "ok", "version": "2.5.1+cu124", "cuda": "12.4", "cuda_available": False,
             "cuda_error": "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
                           "before calling NumCudaDevices() that might have already set an error? Error 802: system "
                           "not yet initialized"}


def test_gd109_reports_error_802_under_slurm_with_the_fabric_managers_remedy(tmp_path):
    """Under a Slurm job CUDA_VISIBLE_DEVICES is set: GD109 still judges, and error 802 is the fabric manager."""
    facts = nvmlsim.collect(hgx("not_started"), tmp_path)
    (finding,) = run("GD109", facts, {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, torch=TORCH_802)
    assert finding.evidence["cause"] == "fabric_manager" and "nvidia-fabricmanager" in finding.fix.summary
    assert run("GD109", facts, {"CUDA_VISIBLE_DEVICES": ""}, torch=TORCH_802) == [], "GD107's: every GPU hidden"


def test_gd109_reports_error_804_as_forward_compatibility(tmp_path):
    facts = nvmlsim.collect(hgx("completed"), tmp_path)
    torch = dict(TORCH_802, cuda_error="RuntimeError: Error 804: forward compatibility was attempted on non "
                                       "supported HW")
    (finding,) = run("GD109", facts, {}, torch=torch)
    assert finding.evidence["cause"] == "forward_compat" and "forward-compatibility" in finding.fix.summary


# --- 4. minor numbers out of PCI order, in a Prolog ------------------------------------------------------------

def out_of_order() -> dict:
    """Minor numbers 3, 2, 1, 0 in PCI order; another job holds 20 GiB on the GPU at NVML index 1 (minor 2)."""
    return {"gpus": [h100(i, minor=minor, processes=[{"pid": 4242, "used_bytes": 20 * GiB}] if i == 1 else [])
                     for i, minor in enumerate((3, 2, 1, 0))]}


@pytest.mark.parametrize("gres_conf, free_id, busy_id, assumed", [
    ("AutoDetect=nvml\n", "2", "1", False),  # slurmd's own list: NVML's (PCI) order
    ("NodeName=gpu-node-[7-8] Name=gpu File=/dev/nvidia[0-3]\n", "1", "2", False),  # by File= number: minor 2 is 2
    (None, "2", "1", True)])  # no gres.conf: PCI order, said to be assumed
def test_the_prolog_judges_the_gpus_slurm_names_by_gres_index(tmp_path, gres_conf, free_id, busy_id, assumed):
    """SLURM_JOB_GPUS holds GRES indices: positions in slurmd's list of GPUs, which gres.conf orders."""
    env = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
    if gres_conf:
        (tmp_path / "gres.conf").write_text("# the node's GPUs\n" + gres_conf)
    _done, _calls, report = nvmlsim.run_prolog(out_of_order(), tmp_path / "free", dict(env, SLURM_JOB_GPUS=free_id))
    assert report["findings"] == [] and "GD502" in report["passed"]
    _done, _calls, report = nvmlsim.run_prolog(out_of_order(), tmp_path / "busy", dict(env, SLURM_JOB_GPUS=busy_id))
    (finding,) = report["findings"]
    assert finding["rule"] == "GD502" and finding["evidence"]["gpu"] == 1
    assert ("GRES indices" in finding["message"]) is assumed


def test_gres_conf_is_read_as_slurmd_reads_it():
    """Other nodes' lines are skipped, hostlist brackets expanded, the files sorted by their number."""
    from gpudoctor.probes.slurm import read_gres_conf

    text = ("AutoDetect=off\nNodeName=a[01-02] Name=gpu Type=h100 File=/dev/nvidia[4-7]\n"
            "NodeName=b01 Name=gpu File=/dev/nvidia1\nNodeName=b01 Name=gpu File=/dev/nvidia0  # comment\n"
            "NodeName=b01 Name=mps Count=100\n")
    assert read_gres_conf(text, "b01") == {"gpu_autodetect": None, "gpu_files": ["/dev/nvidia0", "/dev/nvidia1"]}
    assert read_gres_conf(text, "a02")["gpu_files"] == [f"/dev/nvidia{i}" for i in range(4, 8)]
    assert read_gres_conf("NodeName=a01 AutoDetect=nvml Name=gpu\n", "a01")["gpu_autodetect"] == "nvml"


# --- 7. GD101 beside a torch that runs CUDA ----------------------------------------------------------------------

def test_gd101_is_info_where_torch_runs_cuda_and_prints_the_tables_driver():
    nvml = {"driver_version": "570.133.20", "cuda_driver_version": "12.8", "gpus": []}
    torch = {"status": "ok", "version": "2.9.0+cu130", "cuda": "13.0", "cuda_available": True, "device_count": 8}
    (finding,) = run("GD101", nvml, torch=torch)
    assert finding.severity.name == "INFO" and "sees 8 device(s)" in finding.message
    assert "580.65.06" in finding.message and finding.evidence["min_driver"] == "580.65.06"
    (without,) = run("GD101", nvml, torch=dict(torch, cuda_available=False))
    assert without.severity.name == "ERROR"


# --- 9. CUDA_VISIBLE_DEVICES with no GPU ------------------------------------------------------------------------

def test_gd107_makes_no_claim_without_gpus():
    """No GPU at all: nothing for an index to name (GD103/GD105 say why); no GPU list known: unknown."""
    none = {"status": "unavailable", "error_kind": "library_not_found", "driver_version": None, "gpus": []}
    assert run("GD107", none, {"CUDA_VISIBLE_DEVICES": "0"}) == []
    report = evaluate(Snapshot(facts={"env": {"CUDA_VISIBLE_DEVICES": "0"}}), [find_rule("GD107")])
    assert list(report.findings) == [] and [u.rule for u in report.unknown] == ["GD107"]


# --- 8. the smaller ones ----------------------------------------------------------------------------------------

def test_an_aarch64_wheel_is_not_judged_by_the_x86_64_rows():
    """GH200 (aarch64) with `--quick` (no arch list from torch): the table's rows are the x86_64 wheels'."""
    nvml = {"gpus": [{"name": "NVIDIA GH200 480GB", "cc": "9.0"}]}
    torch = {"status": "ok", "version": "2.5.1+cu124", "cuda": "12.4", "quick": True}
    report = evaluate(Snapshot(facts={"nvml": nvml, "env": {}, "torch": torch, "host": {"arch": "aarch64"}}),
                      [find_rule("GD104")])
    assert [(u.rule, u.missing) for u in report.unknown] == [("GD104", "torch.arch_list")]
    assert "aarch64" in report.unknown[0].reason
    x86 = evaluate(Snapshot(facts={"nvml": nvml, "env": {}, "torch": torch, "host": {"arch": "x86_64"}}),
                   [find_rule("GD104")])
    assert x86.unknown == () and x86.passed == ("GD104",)


def test_gd105_gives_other_init_codes_their_meaning_and_spares_a_pod_without_gpus():
    power = {"status": "error", "error_kind": "insufficient_power", "error": "Insufficient External Power"}
    (finding,) = run("GD105", power)
    assert "NVML could not initialise" in finding.message and "insufficient_power" in finding.fix.summary
    none = {"status": "error", "error_kind": "no_devices", "error": "No devices were found"}
    assert len(run("GD105", none)) == 1
    for asked in ("none", "void"):
        assert run("GD105", none, {"NVIDIA_VISIBLE_DEVICES": asked}) == []


def test_a_leftover_nvidia_ml_py3_pynvml_is_named(tmp_path):
    """nvidia-ml-py3 installs its own pynvml.py (from 2017, before MIG): the child says so instead of crashing."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    (tmp_path / "pynvml.py").write_text("class NVMLError(Exception):\n    pass\n\n\ndef nvmlInit():\n    pass\n\n\n"
                                        "def nvmlShutdown():\n    pass\n")
    child = ROOT / "gpudoctor" / "probes" / "nvml_child.py"
    done = subprocess.run([sys.executable, "-I", str(child), str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    facts = json.loads(done.stdout)
    assert facts["status"] == "error" and facts["error_kind"] == "bindings", done.stderr
    (finding,) = run("GD105", facts)
    assert "pip uninstall -y nvidia-ml-py3" in finding.fix.summary and str(tmp_path) in finding.message


@pytest.mark.parametrize("record_bytes", [24, 32])
def test_on_535_86_the_process_records_are_read_in_the_layout_whose_pids_exist(tmp_path, record_bytes):
    """gpustat and nvitop disagree on 535.86.x's _v3 record size: the layout whose PIDs exist decides (this test's
    own PID and its parent's are the processes on the GPU; the first record reads alike in both layouts)."""
    import os

    from gpudoctor.probes.nvml_child import _in_host_pid_namespace

    if not _in_host_pid_namespace():
        pytest.skip("NVML's PIDs are the host's: outside its PID namespace /proc cannot confirm them")
    node = {"driver_version": "535.86.10", "process_record_bytes": record_bytes,
            "gpus": [h100(0, processes=[{"pid": os.getpid(), "used_bytes": 3 * GiB},
                                        {"pid": os.getppid(), "used_bytes": 5 * GiB}])]}
    (gpu,) = nvmlsim.collect(node, tmp_path)["gpus"]
    assert [(p["pid"], p["used_bytes"]) for p in gpu["processes"]] == [(os.getpid(), 3 * GiB), (os.getppid(), 5 * GiB)]


@pytest.mark.slow
def test_a_gpu_that_hangs_the_driver_is_named_and_the_others_kept(tmp_path, monkeypatch):
    """GPU 1's memory query never returns: the facts of GPU 0 arrive, GPU 1 is reported broken with the query it
    hung in, and the GPUs after it are not counted as seen (nothing claims they are fine)."""
    from gpudoctor.probes import ProbeContext
    from gpudoctor.probes.nvml import probe_nvml

    node = {"gpus": [h100(0), h100(1, fails={"memory": "hang"}), h100(2)]}
    for name, value in nvmlsim.node_env(node, tmp_path, base={}).items():
        monkeypatch.setenv(name, value)
    facts = probe_nvml(ProbeContext(timeout=3))["nvml"]
    assert [g["index"] for g in facts["gpus"]] == [0, 1] and facts["gpus_counted"] is False
    assert facts["gpus"][0]["memory_total_bytes"] == 80 * GiB
    assert facts["gpus"][1]["error_query"].startswith("nvmlDeviceGetMemoryInfo")
    (finding,) = run("GD506", facts, {"SLURM_JOB_GPUS": "0,1,2"})
    assert finding.evidence["gpu"] == 1 and "gpudoctor's 3 s" in finding.message
