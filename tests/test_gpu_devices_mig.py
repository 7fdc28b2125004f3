"""MIG devices as one CUDA process sees them, on a simulated node (tests/nvmlsim) read by the real NVML probe.

NVIDIA's MIG user guide (MIG Device Names › CUDA Device Enumeration): with CUDA 11/R450 and CUDA 12/R525 "a single
CUDA process can only enumerate a single MIG device" and "CUDA will not enumerate non-MIG GPU if any compute
instance is enumerated on any other GPU"; "starting with CUDA 12/R570" one compute instance per GPU instance, and
"if CUDA_VISIBLE_DEVICES is not set, CUDA will pick one from each GPU instance". The rules that map CUDA's devices
onto NVML's without torch's UUIDs (--quick, the Prolog, torch before 2.4) must follow that: GD107's bounds and
GD104, GD405, GD501, GD502. Users see it as torch.cuda.device_count() == 1 on a MIG-partitioned A100 with
CUDA_VISIBLE_DEVICES unset (pytorch/pytorch#102715; nvitop's PR #8 shows the same on driver 510). The parent
GPU's process list answers NO_PERMISSION in MIG mode, as it does to a user who is not root."""

import nvmlsim
import pytest

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.facts.devices import job_gpus
from gpudoctor.snapshot import Snapshot

GiB = 1024**3
MiB = 1024**2
PLAIN = "GPU-0a0a0a0a-1111-4222-8333-000000000000"
PARENT = "GPU-0b0b0b0b-1111-4222-8333-000000000001"
MIG_3G = "MIG-3c3c3c3c-1111-5222-8333-000000000003"   # GPU instance 1, free
MIG_2G_A = "MIG-2a2a2a2a-1111-5222-8333-000000000002"  # GPU instance 5, compute instance 0: another job's 5 GiB
MIG_2G_B = "MIG-2b2b2b2b-1111-5222-8333-000000000002"  # GPU instance 5, compute instance 1
MODEL_2B = {"source": "2B", "params": 2_000_000_000, "kind": "size", "training": {"precision": "bf16"}}


def _mig(slot, uuid, profile, gi, ci, memory, used=0, processes=()):
    gi_slices, ci_slices = int(profile.split("g.")[0][-1]), int(profile[0])
    return {"slot": slot, "uuid": uuid, "name": f"NVIDIA H100 80GB HBM3 MIG {profile}", "gi": gi, "ci": ci,
            "sm_count": 16 * ci_slices, "gi_slices": gi_slices, "ci_slices": ci_slices,
            "memory": {"total": memory, "used": used}, "processes": list(processes)}


def mig_node(driver: str, cuda: int) -> dict:
    """An H100 outside MIG (another job's 4 GiB on it) and an H100 in MIG mode: 3g.40gb (GPU instance 1) and a
    2g.20gb GPU instance split into two compute instances, the first holding another job's 5 GiB."""
    plain = {"name": "NVIDIA H100 80GB HBM3", "uuid": PLAIN, "cc": "9.0", "minor": 0,
             "pci_bus_id": "00000000:18:00.0", "memory": {"total": 80 * GiB, "reserved": 512 * MiB, "used": 4 * GiB},
             "mig": {"enabled": False}, "nvlink": {"links": 18},
             "processes": [{"pid": 4190010, "used_bytes": 4 * GiB}]}
    parent = {"name": "NVIDIA H100 80GB HBM3", "uuid": PARENT, "cc": "9.0", "minor": 1,
              "pci_bus_id": "00000000:2A:00.0", "memory": {"total": 80 * GiB, "reserved": 512 * MiB, "used": 5 * GiB},
              "fails": {"processes": "no_permission"},
              "mig": {"enabled": True, "max_devices": 7, "devices": [
                  _mig(0, MIG_3G, "3g.40gb", 1, 0, 40192 * MiB),
                  _mig(1, MIG_2G_A, "1c.2g.20gb", 5, 0, 19968 * MiB, 5 * GiB, [{"pid": 4190011, "used_bytes": None}]),
                  _mig(2, MIG_2G_B, "1c.2g.20gb", 5, 1, 19968 * MiB)]}}
    return {"driver_version": driver, "cuda_version": cuda, "gpus": [plain, parent]}


@pytest.fixture(scope="module")
def r535(tmp_path_factory):
    return nvmlsim.collect(mig_node("535.183.01", 12020), tmp_path_factory.mktemp("r535"))


@pytest.fixture(scope="module")
def r570(tmp_path_factory):
    return nvmlsim.collect(mig_node("570.133.20", 12080), tmp_path_factory.mktemp("r570"))


def run(rule_id, nvml, env=None, **groups):
    return list(evaluate(Snapshot(facts={"nvml": nvml, "env": env or {}, **groups}), [find_rule(rule_id)]).findings)


def used(nvml, env=None) -> list:
    return [d["uuid"] for d in job_gpus(Facts({"nvml": nvml, "env": env or {}})).devices]


def test_the_simulated_node_is_what_the_probe_reads(r535):
    parent = r535["gpus"][1]
    assert parent["mig_enabled"] is True and "processes" not in parent, "NO_PERMISSION on the parent's list"
    assert [(m["uuid"], m["gpu_instance_id"], m["compute_instance_id"]) for m in parent["mig_devices"]] == [
        (MIG_3G, 1, 0), (MIG_2G_A, 5, 0), (MIG_2G_B, 5, 1)]
    assert parent["mig_devices"][1]["processes"] == [{"pid": 4190011, "name": None, "used_bytes": None}]


# --- CUDA_VISIBLE_DEVICES unset ------------------------------------------------------------------------------

def test_unset_before_r570_one_mig_device_and_no_gpu_outside_mig(r535):
    job = job_gpus(Facts({"nvml": r535, "env": {}}))
    assert [d["uuid"] for d in job.devices] == [MIG_3G]
    assert "a single CUDA process can only enumerate a single MIG device" in job.note()
    assert "CUDA will not enumerate non-MIG GPU" in job.note()


def test_unset_from_r570_one_compute_instance_per_gpu_instance(r570):
    job = job_gpus(Facts({"nvml": r570, "env": {}}))
    assert [d["uuid"] for d in job.devices] == [PLAIN, MIG_3G, MIG_2G_A], "GPU instance 5 once, the plain GPU too"
    assert "enumeration of a single compute instance (CI) per GPU instance (GI)" in job.note()


# --- MIG devices named -------------------------------------------------------------------------------------------

def test_one_mig_device_named_is_the_one_used_on_every_branch(r535, r570):
    for nvml in (r535, r570):
        assert used(nvml, {"CUDA_VISIBLE_DEVICES": MIG_2G_B}) == [MIG_2G_B]
        assert used(nvml, {"CUDA_VISIBLE_DEVICES": f"MIG-{PARENT}/5/1"}) == [MIG_2G_B], "R450's MIG-GPU-…/gi/ci"
        assert run("GD107", nvml, {"CUDA_VISIBLE_DEVICES": MIG_2G_B}) == []


def test_several_mig_devices_named_before_r570_get_one_and_gd107_says_so(r535):
    env = {"CUDA_VISIBLE_DEVICES": f"{MIG_3G},{MIG_2G_A}"}
    assert used(r535, env) == [MIG_3G]
    (finding,) = run("GD107", r535, env)
    assert "names 2 devices" in finding.message and "this process uses 1 (" + MIG_3G in finding.message
    assert "a single CUDA process can only enumerate a single MIG device" in finding.message
    assert finding.evidence["mig_rule"] == "one" and "its own MIG device" in finding.fix.summary
    assert finding.fix.env is None or not finding.fix.env.unset, "unsetting it would not give the process more"


def test_a_gpu_beside_a_mig_device_before_r570_is_not_enumerated(r535, r570):
    env = {"CUDA_VISIBLE_DEVICES": f"{PLAIN},{MIG_3G}"}
    assert used(r535, env) == [MIG_3G]
    assert "CUDA will not enumerate non-MIG GPU" in run("GD107", r535, env)[0].message
    assert used(r570, env) == [PLAIN, MIG_3G] and run("GD107", r570, env) == []


def test_from_r570_one_per_gpu_instance(r570):
    both = {"CUDA_VISIBLE_DEVICES": f"{MIG_3G},{MIG_2G_B}"}
    assert used(r570, both) == [MIG_3G, MIG_2G_B] and run("GD107", r570, both) == []
    same = {"CUDA_VISIBLE_DEVICES": f"{MIG_2G_A},{MIG_2G_B}"}  # two compute instances of GPU instance 5
    assert used(r570, same) == [MIG_2G_A]
    (finding,) = run("GD107", r570, same)
    assert "single compute instance (CI) per GPU instance (GI)" in finding.message


def test_gd107_bounds_count_the_gpus_not_their_mig_devices(r535):
    """Two GPUs answer: index 1 (the MIG GPU) exists, index 2 does not, however many MIG devices there are."""
    assert run("GD107", r535, {"CUDA_VISIBLE_DEVICES": "1"}) == []
    assert "index 2 does not exist" in run("GD107", r535, {"CUDA_VISIBLE_DEVICES": "2"})[0].message
    job = job_gpus(Facts({"nvml": r535, "env": {"CUDA_VISIBLE_DEVICES": "1"}}))
    assert [d["uuid"] for d in job.devices] == [MIG_3G] and "chosen by index" in job.note()


# --- the rules that follow the mapping -----------------------------------------------------------------------------

def test_gd502_judges_the_mig_device_cuda_uses(r535, r570):
    """The busy MIG device and the busy GPU are not the job's where CUDA does not use them."""
    assert run("GD502", r535) == [], "R535: only the free 3g.40gb device"
    busy = {"CUDA_VISIBLE_DEVICES": MIG_2G_A}
    (finding,) = run("GD502", r535, busy)
    assert finding.evidence["held_bytes"] == 5 * GiB and "1c.2g.20gb" in finding.message
    assert [f.evidence["uuid"] for f in run("GD502", r570)] == [PLAIN, MIG_2G_A], "R570: one per GPU instance"


def test_gd501_judges_the_memory_of_the_mig_device_used(r535, r570):
    (finding,) = run("GD501", r535, {"CUDA_VISIBLE_DEVICES": MIG_2G_B}, model=MODEL_2B)
    assert finding.evidence["memory_bytes"] == 19968 * MiB
    assert run("GD501", r535, model=MODEL_2B) == [], "unset on R535: the 3g.40gb device, 40 GB holds 2B"


def test_gd104_judges_the_devices_cuda_uses(r535):
    """A torch without sm_90 fires for the H100 MIG device it would run on, and says why the mapping is assumed."""
    torch = {"status": "ok", "version": "2.8.0+cu128", "cuda": "12.8", "arch_list": ["sm_80"]}
    (finding,) = run("GD104", r535, torch=torch)
    assert finding.evidence["cc"] == "9.0" and "single MIG device" in finding.message


def test_gd405_has_no_pair_where_cuda_uses_one_mig_device(r535):
    """An NVLink GPU and a MIG device named: on R535 CUDA uses the MIG device alone, so NCCL_P2P_DISABLE costs
    this process nothing (counted as two devices, the NVLink GPU made GD405 fire)."""
    env = {"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": f"{PLAIN},{MIG_3G}"}
    assert used(r535, env) == [MIG_3G] and run("GD405", r535, env) == []
    assert len(run("GD405", r535, {"NCCL_P2P_DISABLE": "1", "CUDA_VISIBLE_DEVICES": PLAIN})) == 0, "one GPU"
