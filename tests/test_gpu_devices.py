"""Which GPUs the rules judge, on facts the real NVML probe read from a simulated driver (tests/nvmlsim):
CUDA's devices are mapped onto NVML's by UUID where torch recorded them, else from CUDA_VISIBLE_DEVICES, with the
hidden GPUs of a SLURM cgroup left out and a MIG-partitioned GPU seen as its MIG devices."""

import json
import subprocess

import nvmlsim
import pytest
from conftest import ROOT, gpudoctor_cmd

from gpudoctor.catalog import find_rule, load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.facts import Facts
from gpudoctor.facts.devices import is_mig, job_gpus
from gpudoctor.snapshot import Snapshot, from_json

GiB = 1024**3
MIG_1G = "MIG-4f6b8d0c-2e4a-5c6e-8f1a-3b5d7f9a1c33"
MODEL_1B = {"source": "1B", "params": 1_000_000_000, "kind": "size", "training": {"precision": "bf16"}}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The nvml facts of a DGX A100 whose GPU 5 fell off the bus and whose GPU 7 is split into MIG devices."""
    return nvmlsim.collect(nvmlsim.load_node("a100x8_lost_mig"), tmp_path_factory.mktemp("node"))


@pytest.fixture(scope="module")
def pcie(tmp_path_factory):
    """Four H100 PCIe: P2P between GPUs 0 and 1 only (two PCIe switches, ACS blocks the rest)."""
    gpus = [{"name": "NVIDIA H100 PCIe", "uuid": f"GPU-0000000{i}-1111-4222-8333-44444444444{i}", "cc": "9.0",
             "memory": {"total": 80 * GiB, "reserved": 0, "used": 0}} for i in range(4)]
    pairs = [[0, 1, "ok"], [2, 3, "ok"]]
    node = {"gpus": gpus, "p2p": {"default": "topology_not_supported", "pairs": pairs}}
    return nvmlsim.collect(node, tmp_path_factory.mktemp("pcie"))


def run(rule_id, nvml, env=None, **groups):
    report = evaluate(Snapshot(facts={"nvml": nvml, "env": env or {}, **groups}), [find_rule(rule_id)])
    return list(report.findings)


def gpu_of(finding):
    return finding.evidence.get("gpu")


# --- GD506: every GPU on the node, the lost one included ------------------------------------------------

def test_gd506_reports_the_lost_gpu(node):
    findings = run("GD506", node, {"SLURM_GPUS_ON_NODE": "8"})
    assert [gpu_of(f) for f in findings] == [5]
    assert "GPU is lost" in findings[0].message and "reboot" in findings[0].fix.summary.lower()


def test_gd506_counts_mig_devices_as_slurm_may(node):
    """Seven GPUs work, one in MIG mode with three MIG devices: from Slurm 21.08 gres.conf may list MIG devices as
    GPUs (NVIDIA's MIG user guide, MIG with Slurm), so up to 9 allocated GPUs are there; 10 are not."""
    assert [gpu_of(f) for f in run("GD506", node, {"SLURM_GPUS_ON_NODE": "9"})] == [5]
    count = run("GD506", node, {"SLURM_GPUS_ON_NODE": "10"})[1]
    assert count.evidence == {"expected": 10, "seen": 9, "broken": 1}


def test_live_check_on_the_simulated_node_drains_it(tmp_path):
    """`gpudoctor check` end to end, its NVML probe loading the simulated driver as on the node."""
    env = nvmlsim.node_env(nvmlsim.load_node("a100x8_lost_mig"), tmp_path)
    done = subprocess.run(gpudoctor_cmd() + ["check", "--quick", "--select", "GD506,GD001", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=120)
    report = json.loads(done.stdout)
    assert [(f["rule"], f["evidence"]["gpu"]) for f in report["findings"]] == [("GD506", 5)], done.stderr
    assert done.returncode == 1


@pytest.mark.parametrize("index,command", [(3, "nvidia-smi -r -i 3"), (None, "nvidia-smi -r -i <index>")])
def test_gd506_reset_names_the_gpu_it_resets(index, command):
    """The catalog's fix text gets the GPU's index where NVML gave one, and keeps the user's placeholder where not."""
    gpu = {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-3", "ecc_uncorrected_volatile": 2, "index": index}
    [finding] = run("GD506", {"gpus": [gpu]})
    assert f"`{command}`" in finding.fix.summary


def test_gd506_passes_a_node_without_a_bad_gpu(node):
    healthy = dict(node, gpus=[g for g in node["gpus"] if g["index"] != 5])
    assert run("GD506", healthy) == []


# --- GD502: the job's devices only --------------------------------------------------------------------

def test_gd502_judges_the_visible_gpus(node):
    """Driver 535, no CUDA_VISIBLE_DEVICES: CUDA uses GPU 7's first MIG device and no GPU outside MIG (NVIDIA's MIG
    user guide), a free one: the 30 GiB on GPU 2 and the process on the 1g.10gb device are not this job's."""
    job = job_gpus(Facts({"nvml": node, "env": {}}))
    assert [d["uuid"] for d in job.devices] == [node["gpus"][7]["mig_devices"][0]["uuid"]]
    assert "a single CUDA process can only enumerate a single MIG device" in job.note()
    assert run("GD502", node) == []
    assert [gpu_of(f) for f in run("GD502", node, {"CUDA_VISIBLE_DEVICES": "2"})] == [2]
    assert run("GD502", node, {"CUDA_VISIBLE_DEVICES": "3,4"}) == []


def test_empty_cuda_visible_devices_means_no_gpu(node):
    assert run("GD502", node, {"CUDA_VISIBLE_DEVICES": ""}) == []
    assert job_gpus(Facts({"nvml": node, "env": {"CUDA_VISIBLE_DEVICES": ""}})).devices == []


def test_gd502_follows_torch_uuids_over_renumbered_indices(node):
    """SLURM gave the job NVML GPU 2 and renumbered it CUDA device 0: torch's UUID says which one it is."""
    torch = {"status": "ok", "devices": [{"name": "NVIDIA A100-SXM4-80GB", "uuid": node["gpus"][2]["uuid"][4:]}]}
    findings = run("GD502", node, {"CUDA_VISIBLE_DEVICES": "0"}, torch=torch)
    assert [gpu_of(f) for f in findings] == [2] and findings[0].evidence["mapping"] == "uuid"
    assert "assumed" not in findings[0].message


def test_torch_probe_records_each_device_uuid(mocker):
    """torch's device properties carry the CUDA device's UUID (a CPU build cannot show it: a stand-in torch)."""
    from gpudoctor.probes import torch_child

    props = mocker.Mock(major=8, minor=0, total_memory=80 * GiB, uuid="5f9e0d23-c4a1-4b76-8e05-9d3f2a1b6c03")
    props.name = "NVIDIA A100-SXM4-80GB"
    torch = mocker.Mock()
    torch.cuda.is_available.return_value, torch.cuda.device_count.return_value = True, 1
    torch.cuda.get_device_properties.return_value = props
    facts = {}
    torch_child._cuda_facts(torch, facts)
    assert facts["devices"][0]["uuid"] == "5f9e0d23-c4a1-4b76-8e05-9d3f2a1b6c03"


def test_hidden_gpus_are_not_numbered(tmp_path):
    """ConstrainDevices: NVML counts four GPUs, the job may open 2 and 3, which CUDA calls 0 and 1."""
    gpus = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000",
             "handle_error": "no_permission" if i < 2 else None,
             "processes": [{"pid": 4190003, "used_bytes": GiB}] if i == 3 else []} for i in range(4)]
    facts = nvmlsim.collect({"gpus": gpus}, tmp_path)
    assert [gpu_of(f) for f in run("GD502", facts, {"CUDA_VISIBLE_DEVICES": "1"})] == [3]
    assert run("GD502", facts, {"CUDA_VISIBLE_DEVICES": "0"}) == []
    assert run("GD506", facts, {"SLURM_GPUS_ON_NODE": "2"}) == [], "hidden GPUs are not missing GPUs"


def test_index_mapping_on_mixed_gpus_is_said_to_be_assumed(tmp_path):
    gpus = [{"name": name, "uuid": f"GPU-{i}{i}{i}{i}{i}{i}{i}{i}-0000-4000-8000-000000000000",
             "processes": [{"pid": 4190004, "used_bytes": GiB}]} for i, name in enumerate(["Tesla T4", "NVIDIA L4"])]
    facts = nvmlsim.collect({"gpus": gpus}, tmp_path)
    message = run("GD502", facts, {"CUDA_VISIBLE_DEVICES": "1"})[0].message
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in message
    exact = run("GD502", facts, {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})[0]
    assert gpu_of(exact) == 1 and "assumed" not in exact.message and "PCI_BUS_ID" not in exact.message


# --- MIG: GD501 and GD502 judge the MIG device, not its parent ------------------------------------------

def test_gd501_judges_the_mig_device_memory(node):
    findings = run("GD501", node, {"CUDA_VISIBLE_DEVICES": MIG_1G}, model=MODEL_1B)
    assert len(findings) == 1
    assert findings[0].evidence["memory_bytes"] == 9856 * 1024**2 and "1g.10gb" in findings[0].evidence["gpu"]
    assert run("GD501", node, {"CUDA_VISIBLE_DEVICES": "0"}, model=MODEL_1B) == [], "80 GB holds 1B"


def test_gd502_on_a_mig_device_counts_its_used_memory(node):
    """NVML gives no per-process memory in MIG mode: the MIG device's used memory is what its process holds."""
    findings = run("GD502", node, {"CUDA_VISIBLE_DEVICES": MIG_1G})
    assert [f.evidence["held_bytes"] for f in findings] == [6 * GiB] and "1g.10gb" in findings[0].message
    assert run("GD502", node, {"CUDA_VISIBLE_DEVICES": "MIG-0e5c7a9d"}) == [], "the 3g.40gb device is free"


def test_kubernetes_mig_selection(node):
    """NVIDIA_VISIBLE_DEVICES=MIG-… (the device plugin's choice) with no CUDA_VISIBLE_DEVICES: that MIG device."""
    findings = run("GD501", node, {"NVIDIA_VISIBLE_DEVICES": MIG_1G}, model=MODEL_1B)
    assert [f.evidence["memory_bytes"] for f in findings] == [9856 * 1024**2]


def test_indices_name_the_gpus_cuda_can_open(node):
    """An index counts the GPUs that answer (0-4, 6, 7): 5 is GPU 6, 6 is GPU 7, in MIG mode. Named together on
    driver 535, CUDA uses GPU 7's first MIG device and not GPU 6 (no GPU outside MIG once a MIG device is used)."""
    job = job_gpus(Facts({"nvml": node, "env": {"CUDA_VISIBLE_DEVICES": "5"}}))
    assert [(d["index"], is_mig(d)) for d in job.devices] == [(6, False)]
    job = job_gpus(Facts({"nvml": node, "env": {"CUDA_VISIBLE_DEVICES": "5,6"}}))
    assert [(d["parent_index"], d["name"].split()[-1]) for d in job.devices] == [(7, "3g.40gb")]
    assert "chosen by index" in job.note() and "CUDA will not enumerate non-MIG GPU" in job.note()
    legacy = f"MIG-{node['gpus'][7]['uuid']}/9/0"  # R450's MIG device names
    assert job_gpus(Facts({"nvml": node, "env": {"CUDA_VISIBLE_DEVICES": legacy}})).devices[0]["uuid"] == MIG_1G


# --- GD405: P2P between the job's GPUs ------------------------------------------------------------------

def test_gd405_judges_p2p_between_the_visible_gpus(pcie):
    disabled = {"NCCL_P2P_DISABLE": "1"}
    findings = run("GD405", pcie, dict(disabled, CUDA_VISIBLE_DEVICES="0,1", CUDA_DEVICE_ORDER="PCI_BUS_ID"))
    assert len(findings) == 1 and "PCIe peer-to-peer" in findings[0].message
    assert run("GD405", pcie, disabled) == [], "GPUs 0 and 2 cannot do P2P: disabling it costs nothing"
    assert run("GD405", pcie, dict(disabled, CUDA_VISIBLE_DEVICES="1,2", CUDA_DEVICE_ORDER="PCI_BUS_ID")) == []


# --- GD104 and GD107: the visible GPUs and what CUDA numbers ---------------------------------------------

def test_gd104_skips_gpus_the_job_does_not_see(tmp_path):
    gpus = [{"name": "Tesla V100-SXM2-32GB", "uuid": "GPU-11111111-0000-4000-8000-000000000000", "cc": "7.0"},
            {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-22222222-0000-4000-8000-000000000000", "cc": "9.0"}]
    facts = nvmlsim.collect({"gpus": gpus}, tmp_path)
    torch = {"status": "ok", "version": "2.8.0+cu128", "cuda": "12.8", "arch_list": ["sm_80", "sm_90"]}
    assert [f.evidence["cc"] for f in run("GD104", facts, torch=torch)] == ["7.0"]
    assert run("GD104", facts, {"CUDA_VISIBLE_DEVICES": "GPU-22222222"}, torch=torch) == []


def test_gd201_judges_bf16_on_the_visible_gpus(tmp_path):
    gpus = [{"name": "Tesla V100-SXM2-32GB", "uuid": "GPU-11111111-0000-4000-8000-000000000000", "cc": "7.0"},
            {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-22222222-0000-4000-8000-000000000000", "cc": "8.0"}]
    facts = nvmlsim.collect({"gpus": gpus}, tmp_path)
    requests = {"bf16": [{"source": "train.py", "line": 40, "what": "TrainingArguments(bf16=True)"}]}
    assert [f.evidence["gpus"] for f in run("GD201", facts, requests=requests)] == ["Tesla V100-SXM2-32GB (sm_70)"]
    assert run("GD201", facts, {"CUDA_VISIBLE_DEVICES": "GPU-22222222"}, requests=requests) == []


def test_a_recorded_compute_capability_that_is_not_one_is_never_read_as_one():
    """A snapshot written by hand or by another tool (`"cc": "N/A"`): the GPU's model tells its compute capability,
    and where no table knows the model the rules that need it are unknown; none crashes (GD101, GD104 and GD201 did)."""
    recorded = json.loads((ROOT / "fixtures" / "machines" / "a100-driver470-cu121.json").read_text(encoding="utf-8"))
    as_recorded = evaluate(from_json(recorded), load_catalog())
    for gpu in recorded["facts"]["nvml"]["gpus"]:
        gpu["cc"] = "N/A"
    report = evaluate(from_json(recorded), load_catalog())
    assert [(f.rule, f.message) for f in report.findings] == [(f.rule, f.message) for f in as_recorded.findings]
    assert "GD001" not in {f.rule for f in report.findings}

    requests = {"bf16": [{"source": "train.py", "line": 40, "what": "TrainingArguments(bf16=True)"}]}
    nvml = {"status": "ok", "gpus": [{"index": 0, "name": "Some Future GPU", "cc": "N/A"}]}
    report = evaluate(Snapshot(facts={"nvml": nvml, "env": {}, "requests": requests}), [find_rule("GD201")])
    assert not report.findings and [u.missing for u in report.unknown] == ["nvml.gpus.cc"]


def test_gd107_counts_the_gpus_cuda_can_open(node):
    """Seven GPUs answer (GPU 5 is lost): index 6 is GPU 7, index 7 does not exist, whatever the MIG devices."""
    assert run("GD107", node, {"CUDA_VISIBLE_DEVICES": "6"}) == []
    finding = run("GD107", node, {"CUDA_VISIBLE_DEVICES": "7"})[0]
    assert "index 7 does not exist: CUDA can open 7 GPU(s)" in finding.message
    assert run("GD107", node, {"CUDA_VISIBLE_DEVICES": MIG_1G}) == []


def test_a_gpu_named_without_a_count_is_judged_for_its_model_and_never_counted():
    """An `env` command's `GPU type` with no `GPU number`: bf16 on a V100 is still judged; an index, a SLURM count and
    a memory estimate that need how many GPUs there are stay unknown instead of seeing one."""
    nvml = {"status": "ok", "gpus_counted": False, "gpus": [{"index": 0, "name": "Tesla V100-SXM2-32GB"}]}
    requests = {"bf16": [{"source": "train.py", "line": 40, "what": "TrainingArguments(bf16=True)"}]}
    assert run("GD201", nvml, requests=requests)
    for rule_id, env, groups in (("GD107", {"CUDA_VISIBLE_DEVICES": "3"}, {}),
                                 ("GD506", {"SLURM_GPUS_ON_NODE": "8"}, {}),
                                 ("GD501", {}, {"model": MODEL_1B})):
        report = evaluate(Snapshot(facts={"nvml": nvml, "env": env, **groups}), [find_rule(rule_id)])
        assert not report.findings and [u.missing for u in report.unknown] == ["nvml.gpus_counted"], rule_id
    assert job_gpus(Facts({"nvml": nvml, "env": {"CUDA_VISIBLE_DEVICES": ""}})).count() == 0


# --- the recorded node and its documentation ------------------------------------------------------------

LOST_GPU_FIXTURE = ROOT / "fixtures" / "machines" / "a100x8-lost-gpu.json"


def test_lost_gpu_fixture_is_what_the_probe_records(node):
    """fixtures/machines/a100x8-lost-gpu.json holds the probe's facts on the simulated node (kernel module and the
    measured NVML initialisation time aside)."""
    recorded = json.loads(LOST_GPU_FIXTURE.read_text())["facts"]["nvml"]
    assert dict(recorded, kernel_module=None) == {key: value for key, value in node.items() if key != "init_seconds"}


# --- a SLURM Prolog: the job's GPUs by SLURM's global IDs (GRES indices, in PCI order) --------------------------

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A shared node: four GPUs whose minor numbers are not in PCI order (minor 3 sits at NVML index 0), another
    job's process holding 20 GiB on the GPU at NVML index 1 (minor number 2)."""
    gpus = [{"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-5ba7ed00-0000-4000-8000-00000000000{i}", "cc": "8.0",
             "minor": minor, "memory": {"total": 80 * GiB, "reserved": 0, "used": 0},
             "processes": [{"pid": 4242, "used_bytes": 20 * GiB}] if minor == 2 else []}
            for i, minor in enumerate((3, 2, 1, 0))]
    return nvmlsim.collect({"gpus": gpus}, tmp_path_factory.mktemp("shared"))


@pytest.mark.parametrize("variable", ["SLURM_JOB_GPUS", "SLURM_STEP_GPUS"])
def test_gd502_in_a_prolog_judges_the_jobs_gpus_by_gres_index(shared, variable):
    """Since Slurm 21.08 the IDs are GRES indices in PCI order (gres_common.c writes gres_device->index), not minor
    numbers: SLURM_JOB_GPUS=1 is NVML index 1, the busy GPU, whose minor number is 2. SLURM_JOB_GPUS=2 is NVML index 2
    (minor 1), a free GPU: read as a minor number it would name the busy one."""
    (finding,) = run("GD502", shared, {variable: "1"})
    assert gpu_of(finding) == 1 and finding.evidence["mapping"] == "slurm_gpus"
    assert "GRES indices" in finding.message, "the index-to-GPU mapping is said to be assumed"
    assert run("GD502", shared, {variable: "2"}) == []
    assert [d["index"] for d in job_gpus(Facts({"nvml": shared, "env": {variable: "2,3"}})).devices] == [2, 3]


def test_slurm_ids_past_the_gpus_fall_back(shared):
    assert job_gpus(Facts({"nvml": shared, "env": {"SLURM_JOB_GPUS": "7"}})).basis == "all"


def test_nvml_init_time_is_its_own_figure(shared):
    assert isinstance(shared["init_seconds"], float) and 0 <= shared["init_seconds"] < 30


def test_gd107_reads_the_value_as_cuda_does(node):
    """CUDA strips the spaces around an entry (" 1", "0, 1" are valid) and sees no device at all when one is named
    twice ("0,0"); a space inside an entry is still malformed."""
    assert run("GD107", node, {"CUDA_VISIBLE_DEVICES": " 1"}) == []
    assert run("GD107", node, {"CUDA_VISIBLE_DEVICES": "0, 1"}) == []
    twice = run("GD107", node, {"CUDA_VISIBLE_DEVICES": "0,0"})
    assert len(twice) == 1 and "sees no device" in twice[0].message
    assert job_gpus(Facts({"nvml": node, "env": {"CUDA_VISIBLE_DEVICES": "0,0"}})).devices == []
    assert "malformed" in run("GD107", node, {"CUDA_VISIBLE_DEVICES": "GPU 1"})[0].message


def test_torch_before_2_4_gives_no_uuids_and_the_mapping_is_said_assumed(node):
    """torch's device UUID arrived in 2.4 (pytorch PR #125083): with an older torch the mapping is an assumption."""
    old = {"status": "ok", "version": "2.3.1", "devices": [{"name": "NVIDIA A100-SXM4-80GB"}]}
    job = job_gpus(Facts({"nvml": node, "env": {}, "torch": old}))
    assert job.basis == "all" and "torch 2.3.1 gives no device UUIDs (torch 2.4+ does)" in job.note()
    new = {"status": "ok", "version": "2.4.0", "devices": [{"name": "NVIDIA A100-SXM4-80GB",
                                                             "uuid": node["gpus"][0]["uuid"][4:]}]}
    assert job_gpus(Facts({"nvml": node, "env": {}, "torch": new})).note() == ""
