"""GD401-GD410 on the user's own NCCL notes (seed 002), on clean real-world jobs, and on the value grammars."""

from pathlib import Path

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import find_rule, load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.facts.nccl_values import c_strtoll, nccl_ifname_matches, value_problems
from gpudoctor.model import Applicability
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot

JOBS = FIXTURES / "jobs"
HOST_INDEPENDENT = [rule for rule in load_catalog() if not rule.host]


def lint(*names, facts=None):
    """What `gpudoctor lint` finds: the host-independent rules over the files."""
    snapshot = Snapshot(facts={"env": {}, **(facts or {})})
    for name in names:
        read_file(JOBS / name, snapshot)
    return evaluate(snapshot, HOST_INDEPENDENT)


def summary(report):
    return sorted((f.rule, f.evidence.get("variable"), f.location.line if f.location else None, str(f.severity))
                  for f in report.findings)


def run(rule_id, facts):
    return evaluate(Snapshot(facts=facts), [find_rule(rule_id)])


# --- seed 002: the user's EKS NeMo notes ----------------------------------------------------------------

def test_seed_002_shell_export_block():
    report = lint("seed002_nccl_exports.sh")
    assert summary(report) == [
        ("GD401", "NCCL_ALGO_ALL", 10, "warning"),
        ("GD401", "NCCL_ALGO_TREE", 11, "warning"),
        ("GD401", "NCCL_COMM_BLOCKING_WAIT", 39, "warning"),
        ("GD401", "NCCL_COMM_WAIT_TIMEOUT", 47, "warning"),
        ("GD404", "NCCL_ASYNC_ERROR_HANDLING", 40, "info"),  # deprecated since torch 2.2, torch unknown in lint
        ("GD404", "NCCL_CHECKS_DISABLE", 38, "warning"),  # deprecated 2.2.12: every NCCL in use
        ("GD404", "NCCL_MAX_NCHANNELS", 18, "info"),  # deprecated since NCCL 2.17, NCCL unknown in lint
        ("GD404", "NCCL_MIN_NCHANNELS", 17, "info"),
        ("GD406", "NCCL_DEBUG", 24, "info"),
        ("GD406", "NCCL_DEBUG_FILE", 25, "info"),  # no %h/%p: ranks overwrite one file
        ("GD406", "NCCL_DEBUG_SUBSYS", 26, "info"),
        # the EFA variables of section 7 spare only AWS's own EFA setting (NCCL_PROTO=Simple), not these
        ("GD411", "NCCL_ALGO", 9, "warning"),
        ("GD411", "NCCL_BUFFSIZE", 21, "warning"),
        ("GD411", "NCCL_MAX_NCHANNELS", 18, "warning"),
        ("GD411", "NCCL_MIN_NCHANNELS", 17, "warning"),
        ("GD411", "NCCL_P2P_LEVEL", 44, "info"),
        # "use InfiniBand" beside FI_PROVIDER=efa: NCCL's default, and EFA is not reached through NET/IB
        ("GD436", "NCCL_IB_DISABLE", 30, "info"),
    ]
    assert not report.unknown
    by_variable = {f.evidence["variable"]: f for f in report.findings}
    assert "NCCL_ALGO=Tree" in by_variable["NCCL_ALGO_TREE"].message
    assert "init_process_group" in by_variable["NCCL_COMM_WAIT_TIMEOUT"].message
    assert "TORCH_NCCL_BLOCKING_WAIT" in by_variable["NCCL_COMM_BLOCKING_WAIT"].message
    for finding in report.findings:
        assert finding.location.path.endswith("seed002_nccl_exports.sh")
        assert finding.fix.env, finding.message


def test_seed_002_shell_block_with_known_versions():
    """On the machine (torch 2.5 with NCCL 2.21) the version-dependent findings are warnings."""
    report = lint("seed002_nccl_exports.sh", facts={"torch": {"version": "2.5.1+cu124", "nccl": "2.21.5"}})
    severities = {(f.rule, f.evidence["variable"]): str(f.severity) for f in report.findings}
    assert severities[("GD404", "NCCL_ASYNC_ERROR_HANDLING")] == "warning"
    assert severities[("GD404", "NCCL_MIN_NCHANNELS")] == "warning"
    fix = next(f.fix for f in report.findings if f.evidence["variable"] == "NCCL_ASYNC_ERROR_HANDLING")
    assert fix.applicability == Applicability.SAFE
    assert dict(fix.env.set) == {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert fix.env.unset == ("NCCL_ASYNC_ERROR_HANDLING",)


def nccl_only(report):
    return [item for item in summary(report) if item[0].startswith("GD4")]


def test_seed_002_kubernetes_yaml():
    report = lint("seed002_nccl_pod.yaml")
    # NCCL_PROTO=simple is AWS's EFA setting; the two topology cutoffs are not (info); the InfiniBand settings
    # beside EFA are said for what they do there (info)
    assert nccl_only(report) == [("GD406", "NCCL_DEBUG", 14, "info"), ("GD411", "NCCL_NET_GDR_LEVEL", 26, "info"),
                                 ("GD411", "NCCL_P2P_LEVEL", 28, "info"), ("GD436", "NCCL_CROSS_NIC", 30, "info"),
                                 ("GD436", "NCCL_IB_DISABLE", 22, "info")]
    assert "container trainer of Pod distributed-training" in report.findings[0].message
    # the pod of the seed also configures EFA without requesting the device, and has no /dev/shm (GD9xx)
    assert [(f.rule, f.location.line, str(f.severity)) for f in report.findings if f.rule.startswith("GD9")] == [
        ("GD901", 10, "warning"), ("GD902", 34, "error")]


def test_seed_002_pytorchjob_and_benchmark():
    report = lint("seed002_pytorchjob.yaml", "seed002_topology_benchmark.yaml")
    assert nccl_only(report) == [("GD406", "NCCL_DEBUG", 26, "info"), ("GD406", "NCCL_DEBUG", 67, "info"),
                                 ("GD406", "NCCL_DEBUG", 67, "info")]
    paths = sorted(f.location.path.rsplit("/", 1)[-1] for f in report.findings if f.rule.startswith("GD4"))
    assert paths == ["seed002_pytorchjob.yaml", "seed002_pytorchjob.yaml", "seed002_topology_benchmark.yaml"]


def test_seed_002_on_this_host_checks_the_interface(tmp_path):
    """check --env-file on a host without eth0: GD403 as well."""
    snapshot = Snapshot(facts={"env": {}, "host": {"interfaces": [
        {"name": "lo", "up": True, "addresses": ["127.0.0.1"]},
        {"name": "ens5", "up": True, "addresses": ["10.0.3.17"]}]}})
    from gpudoctor.readers.registry import read_env_files

    read_env_files([str(JOBS / "seed002_nccl_exports.sh")], snapshot)
    report = evaluate(snapshot, [find_rule("GD403")])
    (finding,) = report.findings
    assert finding.location.line == 29 and "ens5" in finding.message
    assert dict(finding.fix.env.set) == {"NCCL_SOCKET_IFNAME": "=ens5"}


def test_a_batch_scripts_interface_is_unknown_here_not_wrong(tmp_path):
    """An sbatch is meant for the nodes it runs on: `check --env-file job.sbatch` on a login node without eth0
    cannot judge its eth0 (GD403 unknown, saying why); the same value from a plain exports file is judged, and the
    fix says what the leading `=` means."""
    host = {"interfaces": [{"name": "lo", "up": True, "addresses": ["127.0.0.1"]},
                           {"name": "ens5", "up": True, "addresses": ["10.0.3.17"]}]}
    from gpudoctor.readers.registry import read_env_files

    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH -N 2\nexport NCCL_SOCKET_IFNAME=eth0\nsrun torchrun --nnodes=2 train.py\n")
    exports = tmp_path / "exports.sh"
    exports.write_text("export NCCL_SOCKET_IFNAME=eth0\n")
    for path, judged in ((job, False), (exports, True)):
        snapshot = Snapshot(facts={"env": {}, "host": host})
        read_env_files([str(path)], snapshot)
        report = evaluate(snapshot, [find_rule("GD403")])
        if judged:
            (finding,) = report.findings
            assert "`=ens5`" in finding.fix.summary and "exact-match form" in finding.fix.summary
        else:
            assert not report.findings and [u.rule for u in report.unknown] == ["GD403"]
            assert "job.sbatch" in report.unknown[0].reason and "not known here" in report.unknown[0].reason


# --- clean jobs -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["clean_multinode.sbatch", "clean_pytorchjob.yaml"])
def test_clean_jobs_report_nothing(name):
    """Nothing above info; the infos are a site's GPUDirect cutoff (GD411) and the EKS memlock note (GD903)."""
    report = lint(name)
    assert all(str(f.severity) == "info" for f in report.findings), [f.message for f in report.findings]
    assert {f.rule for f in report.findings} <= {"GD411", "GD903"}
    assert not report.unknown


def test_clean_sbatch_tensor_parallel_needs_the_variable():
    text = (JOBS / "clean_multinode.sbatch").read_text().replace("export CUDA_DEVICE_MAX_CONNECTIONS=1\n", "")
    from gpudoctor.readers.env import apply
    from gpudoctor.readers.shell.jobs import read_script

    snapshot = Snapshot(facts={"env": {}})
    apply(snapshot, read_script(text, "job.sbatch")[0], "job.sbatch")
    report = evaluate(snapshot, [find_rule("GD408")])
    (finding,) = report.findings
    assert finding.location.line == 59 and "--tensor-model-parallel-size" in finding.message
    assert dict(finding.fix.env.set) == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


# --- bad and tricky input -------------------------------------------------------------------------------

def test_bad_inputs_are_reported_with_their_line():
    report = lint("bad_manifest.yaml", "bad_job.sh", "bad.env", "Dockerfile.bad")
    unreadable = sorted((f.location.path.rsplit("/", 1)[-1], f.location.line) for f in report.findings
                        if f.rule == "GD003")
    assert unreadable == [("bad.env", 5), ("bad_job.sh", 13), ("bad_manifest.yaml", 15), ("bad_manifest.yaml", 29)]
    conflicts = sorted((f.location.path.rsplit("/", 1)[-1], f.evidence["variable"], f.location.line)
                       for f in report.findings if f.rule == "GD410")
    assert conflicts == [("Dockerfile.bad", "NCCL_DEBUG", 9), ("bad.env", "NCCL_SOCKET_IFNAME", 7),
                         ("bad_job.sh", "NCCL_IB_HCA", 12), ("bad_manifest.yaml", "NCCL_DEBUG", 18)]
    invalid = sorted((f.evidence["variable"], f.location.line) for f in report.findings if f.rule == "GD402")
    assert invalid == [("NCCL_IB_DISABLE", 6), ("NCCL_P2P_LEVEL", 5), ("NCCL_PROTO", 7)]
    messages = " ".join(f.message for f in report.findings)
    assert "quote it" in messages and "YAML does not parse" in messages and "unterminated" in messages


# --- value grammars -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("4194304", (4194304, True)), ("0x400000", (4194304, True)), ("010", (8, True)), ("-1", (-1, True)),
    ("4M", (4, False)), ("true", (None, False)), (" 7 ", (7, True)), ("", (None, False)),
])
def test_c_strtoll(text, expected):
    assert c_strtoll(text) == expected


@pytest.mark.parametrize("name,value,bad", [
    ("NCCL_ALGO", "Ring", False), ("NCCL_ALGO", "ring,tree", False), ("NCCL_ALGO", "^NVLS,CollNetDirect", False),
    ("NCCL_ALGO", "allreduce:tree,ring;allgather:ring", False), ("NCCL_ALGO", "Ring,Foo", True),
    ("NCCL_ALGO", "ALL", True), ("NCCL_ALGO", "Ring, Tree", True), ("NCCL_ALGO", "ring;allgather:ring", False),
    ("NCCL_ALGO", "allreducee:tree", True),
    ("NCCL_PROTO", "LL,LL128,Simple", False), ("NCCL_PROTO", "^ll128", False), ("NCCL_PROTO", "simple2", True),
    ("NCCL_P2P_LEVEL", "NVL", False), ("NCCL_P2P_LEVEL", "3", False), ("NCCL_P2P_LEVEL", "nvl", True),
    ("NCCL_P2P_LEVEL", "NVLINK", True), ("NCCL_NET_GDR_LEVEL", "PIX", False),
    ("NCCL_IB_DISABLE", "1", False), ("NCCL_IB_DISABLE", "true", True), ("NCCL_IB_DISABLE", "2", True),
    ("NCCL_NTHREADS", "256", False), ("NCCL_NTHREADS", "1024", True), ("NCCL_IB_TIMEOUT", "32", True),
    ("NCCL_BUFFSIZE", "8M", True), ("NCCL_DEBUG", "info", False), ("NCCL_DEBUG", "DEBUG", True),
    ("NCCL_DEBUG_SUBSYS", "INIT,NET", False), ("NCCL_DEBUG_SUBSYS", "^INIT", False),
    ("NCCL_DEBUG_SUBSYS", "INIT,NETWORK", True), ("NCCL_SOCKET_FAMILY", "AF_INET", False),
    ("NCCL_SOCKET_FAMILY", "ipv4", True), ("NCCL_SOCKET_IFNAME", "^=docker0,lo", False),
    ("NCCL_SOCKET_IFNAME", "eth0, eth1", True), ("NCCL_SOCKET_IFNAME", "=^docker", True),
    ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1", False), ("NCCL_CTA_POLICY", "EFFICIENCY|ZERO", False),
    # an IPoIB or Ethernet interface where an RDMA device belongs; udev's RDMA names (ibp…, rocep…) are devices
    ("NCCL_IB_HCA", "ib0", True), ("NCCL_IB_HCA", "ib0:1,ib1:1", True), ("NCCL_IB_HCA", "=ens1f0np0", True),
    ("NCCL_IB_HCA", "^=eth0", False), ("NCCL_IB_HCA", "ibp59s0,rocep65s0f0", False),
    ("NCCL_IB_HCA", "mlx5_bond_0", False),
    ("NCCL_NETDEVS_POLICY", "MAX:2", False), ("NCCL_NETDEVS_POLICY", "MAX", True),
    ("TORCH_NCCL_BLOCKING_WAIT", "True", False), ("TORCH_NCCL_BLOCKING_WAIT", "yes", True),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3", False), ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "4", True),
    ("TORCH_DISTRIBUTED_DEBUG", "detail", False), ("TORCH_DISTRIBUTED_DEBUG", "VERBOSE", True),
    ("FI_EFA_USE_DEVICE_RDMA", "on", False), ("FI_EFA_USE_DEVICE_RDMA", "maybe", True),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1", False), ("CUDA_DEVICE_MAX_CONNECTIONS", "0", True),
    ("GLOO_SOCKET_IFNAME", "eth0,eth1", False), ("GLOO_SOCKET_IFNAME", "eth0, eth1", True),
    ("NCCL_DEBUG_FILE", "~/nccl.log", True), ("NCCL_NET", "AWS Libfabric", False),
    ("NCCL_SOCKET_IFNAME", "", False), ("NOT_A_DOCUMENTED_VARIABLE", "anything", False),
])
def test_value_grammars(name, value, bad):
    problems = value_problems(name, value)
    hard = [p for p in problems if not (p.since or p.before)]
    assert bool(hard) == bad, [p.message for p in problems]


def test_algo_fix_drops_unknown_tokens_and_spaces():
    (problem,) = [p for p in value_problems("NCCL_ALGO", "Ring,Foo") if p.fixed]
    assert problem.fixed == "Ring"
    assert {p.fixed for p in value_problems("NCCL_ALGO", "Ring, Tree")} == {"Ring,Tree"}


@pytest.mark.parametrize("nccl,value,severities", [
    (None, "PAT", ["info"]), ("2.21.5", "PAT", ["error"]), ("2.23.4", "PAT", []),
    (None, "CollNet", ["info"]), ("2.13.4", "CollNet", []), ("2.18.1", "CollNet", ["error"]),
    ("2.26.2", "allreduce:tree;allgather:ring", []), ("2.21.5", "allreduce:tree;allgather:ring", ["error"]),
    ("2.26.2", "tree;ring", ["error"]), ("2.21.5", "tree;ring", ["error"]),
    (None, "Foo", ["error"]), ("2.18.1", "Foo", ["error"]),
])
def test_algo_is_version_aware(nccl, value, severities):
    facts = {"env": {"NCCL_ALGO": value}}
    if nccl:
        facts["torch"] = {"nccl": nccl}
    report = run("GD402", facts)
    assert [str(f.severity) for f in report.findings] == severities, [f.message for f in report.findings]


@pytest.mark.parametrize("value,names,expected", [
    ("eth", ["lo", "eth0", "eth1", "ens5"], ["eth0", "eth1"]),
    ("=eth0", ["eth0", "eth01"], ["eth0"]),
    ("^docker,lo", ["lo", "docker0", "bond0"], ["bond0"]),
    ("^=docker0", ["docker0", "docker01"], ["docker01"]),
    ("eth0:1,ib", ["eth0", "ib0", "ens5"], ["eth0", "ib0"]),
    ("=eth", ["eth0"], []),
])
def test_nccl_interface_matching(value, names, expected):
    assert nccl_ifname_matches(value, names) == expected


# --- rule by rule ----------------------------------------------------------------------------------------

def test_gd401_suggests_the_closest_real_name_and_renames_unsafely():
    report = run("GD401", {"env": {"NCCL_SOCKET_IFNAM": "eth0", "NCCL_IB_HCAS": "mlx5"}})
    messages = {f.evidence["variable"]: f for f in report.findings}
    assert "did you mean NCCL_SOCKET_IFNAME?" in messages["NCCL_SOCKET_IFNAM"].message
    fix = messages["NCCL_SOCKET_IFNAM"].fix
    assert fix.applicability == Applicability.UNSAFE
    assert dict(fix.env.set) == {"NCCL_SOCKET_IFNAME": "eth0"} and fix.env.unset == ("NCCL_SOCKET_IFNAM",)
    assert messages["NCCL_IB_HCAS"].evidence["suggestion"] == "NCCL_IB_HCA"


def test_gd401_plugin_and_unknown_names():
    report = run("GD401", {"env": {"NCCL_FASTRAK_USE_SNAP": "1", "NCCL_TOTALLY_MADE_UP": "1",
                                    "TORCH_NCCL_TRACE_BUFER_SIZE": "2000"}})
    by_variable = {f.evidence["variable"]: f for f in report.findings}
    assert set(by_variable) == {"NCCL_TOTALLY_MADE_UP", "TORCH_NCCL_TRACE_BUFER_SIZE"}
    assert by_variable["NCCL_TOTALLY_MADE_UP"].fix.applicability == Applicability.SAFE
    assert by_variable["TORCH_NCCL_TRACE_BUFER_SIZE"].evidence["suggestion"] == "TORCH_NCCL_TRACE_BUFFER_SIZE"


def test_gd401_name_newer_than_the_nccl_in_use():
    report = run("GD401", {"env": {"NCCL_RAS_ENABLE": "0"}, "torch": {"nccl": "2.21.5"}})
    (finding,) = report.findings
    assert "2.24" in finding.message
    assert not run("GD401", {"env": {"NCCL_RAS_ENABLE": "0"}, "torch": {"nccl": "2.26.2"}}).findings


def test_gd402_fix_proposes_the_corrected_value():
    (finding,) = run("GD402", {"env": {"NCCL_P2P_LEVEL": "nvl"}}).findings
    assert dict(finding.fix.env.set) == {"NCCL_P2P_LEVEL": "NVL"}
    (finding,) = run("GD402", {"env": {"NCCL_IB_DISABLE": "true"}}).findings
    assert dict(finding.fix.env.set) == {"NCCL_IB_DISABLE": "1"} and "counts as 0" in finding.message


def test_gd402_socket_threads_product():
    report = run("GD402", {"env": {"NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "16"}})
    assert ["128" in f.message for f in report.findings] == [True]


def test_gd404_both_names_set_with_different_values():
    (finding,) = run("GD404", {"env": {"NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"},
                               "torch": {"version": "2.4.0"}}).findings
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=3 is also set and wins" in finding.message
    assert finding.fix.env.unset == ("NCCL_ASYNC_ERROR_HANDLING",) and not finding.fix.env.set


def test_gd404_check_pointers_is_removed_not_renamed_into_check_mode():
    """Its replacement NCCL_CHECK_MODE=DEBUG_LOCAL is a debugging switch GD409 would remove next."""
    (finding,) = run("GD404", {"env": {"NCCL_CHECK_POINTERS": "1"}, "torch": {"nccl": "2.30.4"}}).findings
    assert "NCCL_CHECK_MODE=DEBUG_LOCAL is a debugging switch" in finding.message
    assert not finding.fix.env.set and finding.fix.env.unset == ("NCCL_CHECK_POINTERS",)
    assert finding.fix.applicability == Applicability.SAFE


def test_gd404_source_only_names_no_longer_read():
    (finding,) = run("GD404", {"env": {"NCCL_WORK_FIFO_DEPTH": "65536"}, "torch": {"nccl": "2.26.2"}}).findings
    assert "2.21.5" in finding.message
    assert not run("GD404", {"env": {"NCCL_WORK_FIFO_DEPTH": "65536"}, "torch": {"nccl": "2.18.1"}}).findings


def test_gd405_unknown_without_p2p_facts():
    report = run("GD405", {"env": {"NCCL_P2P_DISABLE": "1"}, "nvml": {"gpus": [{"name": "A"}, {"name": "B"}]}})
    assert report.unknown and report.unknown[0].missing == "nvml.p2p_supported"
    assert not run("GD405", {"env": {"NCCL_P2P_DISABLE": "1"}, "nvml": {"gpus": [{"name": "A"}]}}).findings


def test_gd405_rtx_4090_after_the_driver_fix_is_a_normal_gpu():
    facts = {"env": {}, "nvml": {"driver_version": "550.54.15", "p2p_supported": False,
                                 "gpus": [{"name": "NVIDIA GeForce RTX 4090"}] * 2}}
    assert not run("GD405", facts).findings


def test_gd406_conditional_debug_is_a_switch_not_a_leftover():
    text = "export NCCL_DEBUG=WARN\nif [ -n \"$DEBUG\" ]; then\n  export NCCL_DEBUG=INFO\nfi\n"
    from gpudoctor.readers.env import apply
    from gpudoctor.readers.shell.jobs import read_script

    snapshot = Snapshot(facts={"env": {}})
    apply(snapshot, read_script(text, "job.sh")[0], "job.sh")
    assert snapshot.facts["env"]["NCCL_DEBUG"] == "WARN"
    assert not evaluate(snapshot, [find_rule("GD406"), find_rule("GD410")]).findings


def test_gd407_needs_an_active_rdma_port():
    down = {"env": {"NCCL_IB_DISABLE": "1"}, "host": {"ib_devices": [
        {"name": "mlx5_0", "ports": [{"port": 1, "state": "DOWN", "link_layer": "InfiniBand"}]}]}}
    assert not run("GD407", down).findings
    roce = {"env": {"NCCL_IB_DISABLE": "1"}, "host": {"ib_devices": [
        {"name": "mlx5_bond_0", "ports": [{"port": 1, "state": "ACTIVE", "link_layer": "Ethernet"}]}]}}
    assert "mlx5_bond_0 (Ethernet)" in run("GD407", roce).findings[0].message


def test_gd408_unresolved_value_is_not_judged():
    facts = {"env": {}, "env_sources": {"CUDA_DEVICE_MAX_CONNECTIONS": {
        "path": "job.sh", "line": 3, "unresolved": "set by `$CDMC` at run time", "value": "$CDMC"}},
        "requests": {"tensor_parallel": [{"source": "job.sh", "line": 9, "what": "--tensor-model-parallel-size 2",
                                          "size": 2, "frameworks": ["megatron"]}]}}
    assert not run("GD408", facts).findings


def test_gd408_env_evidence():
    (finding,) = run("GD408", {"env": {"TENSOR_MODEL_PARALLEL_SIZE": "4"}}).findings
    assert "TENSOR_MODEL_PARALLEL_SIZE=4" in finding.message


def test_gd409_injection_and_conditional():
    report = run("GD409", {"env": {"LD_PRELOAD": "/opt/cuda/compute-sanitizer/libsanitizer-collection.so",
                                   "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}})
    assert sorted(f.evidence["variable"] for f in report.findings) == ["LD_PRELOAD", "PYTORCH_NO_CUDA_MEMORY_CACHING"]


def test_gd410_scopes():
    from gpudoctor.readers.env import apply
    from gpudoctor.readers.k8s import env as k8s

    manifest = ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    env:\n"
                "    - name: NCCL_DEBUG\n      value: INFO\n    - name: NCCL_DEBUG\n      value: WARN\n"
                "  - name: b\n    image: x\n    env:\n    - name: NCCL_DEBUG\n      value: TRACE\n")
    snapshot = Snapshot(facts={"env": {}})
    apply(snapshot, k8s.read(manifest, "pod.yaml"), "pod.yaml")
    (finding,) = evaluate(snapshot, [find_rule("GD410")]).findings
    assert finding.location.line == 10 and "'INFO' at line 8" in finding.message and "container a" in finding.message


@pytest.mark.parametrize("reader,text,conflict", [
    # a prefix assignment is that command's own environment: two launches with their own LOCAL_RANK
    ("shell", "MASTER_PORT=1234 LOCAL_RANK=1 python train.py &\nMASTER_PORT=1234 LOCAL_RANK=0 python train.py\n",
     False),
    ("shell", "export NCCL_DEBUG=INFO\nNCCL_DEBUG=WARN python train.py\n", False),
    ("shell", "export NCCL_DEBUG=INFO\nexport NCCL_DEBUG=WARN\npython train.py\n", True),
    # os.environ in two functions (enable/disable helpers) are different runs; twice in one function is a conflict
    ("pyenv", "import os\n\ndef enable():\n    os.environ['NCCL_P2P_DISABLE'] = '1'\n\n\ndef disable():\n"
              "    os.environ['NCCL_P2P_DISABLE'] = '0'\n", False),
    ("pyenv", "import os\n\ndef setup():\n    os.environ['NCCL_P2P_DISABLE'] = '1'\n"
              "    os.environ['NCCL_P2P_DISABLE'] = '0'\n", True),
    ("pyenv", "import os\nos.environ['NCCL_P2P_DISABLE'] = '1'\nos.environ['NCCL_P2P_DISABLE'] = '0'\n", True),
    # `env = base.copy()` again is a new dict for another launch
    ("pyenv", "env = dict(BASE)\nenv['NCCL_ALGO'] = 'Ring'\nrun(env)\nenv = dict(BASE)\nenv['NCCL_ALGO'] = 'Tree'\n",
     False),
    ("pyenv", "env = dict(BASE)\nenv['NCCL_ALGO'] = 'Ring'\nenv['NCCL_ALGO'] = 'Tree'\n", True),
])
def test_gd410_one_environment_per_command_and_per_function(reader, text, conflict):
    from gpudoctor.readers import python
    from gpudoctor.readers.env import apply
    from gpudoctor.readers.shell.jobs import read_script

    path = "run.sh" if reader == "shell" else "launch.py"
    result = read_script(text, path)[0] if reader == "shell" else python.read(Path(path), text).env
    snapshot = Snapshot(facts={"env": {}})
    apply(snapshot, result, path)
    assert bool(evaluate(snapshot, [find_rule("GD410")]).findings) is conflict


def test_env_file_overlay_conflicts_across_files(tmp_path):
    from gpudoctor.readers.registry import read_env_files

    first, second = tmp_path / "a.env", tmp_path / "b.env"
    first.write_text("NCCL_DEBUG=INFO\n")
    second.write_text("NCCL_DEBUG=WARN\n")
    snapshot = Snapshot(facts={"env": {"NCCL_DEBUG": "VERSION"}})
    read_env_files([str(first), str(second)], snapshot)
    assert snapshot.facts["env"]["NCCL_DEBUG"] == "WARN"
    (finding,) = evaluate(snapshot, [find_rule("GD410")]).findings
    assert finding.location.path == str(second)


def test_fixes_are_env_changes_gpudoctor_fix_can_apply():
    report = lint("seed002_nccl_exports.sh", "bad_job.sh", "bad.env")
    fixable = [f for f in report.findings if f.rule.startswith("GD4") and f.rule != "GD410"]
    # the files hold each kind of fixable NCCL setting: a renamed or typo'd name, an unsafe value, a debug level
    assert {f.rule for f in fixable} >= {"GD401", "GD402", "GD404", "GD406", "GD411"}
    for finding in fixable:
        assert finding.fix.env, finding.message
        assert finding.fix.applicability in (Applicability.SAFE, Applicability.UNSAFE)


# --- never crash ---------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpudoctor.facts.nccl_settings import knowledge  # noqa: E402

NAMES = sorted(knowledge()["var"]) + ["NCCL_ALGO_ALL", "NCCL_SOCKET_IFNAM", "nccl_debug", "TORCH_NCCL_X"]
VALUES = st.text(alphabet=st.sampled_from(list("0123456789abcxyzABCXYZ^=:;,|-_ .%~$x")), max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=6),
       st.sampled_from([None, "2.10.3", "2.21.5", "2.26.2", "banana"]),
       st.sampled_from([None, "1.13.1", "2.1.0", "2.5.1+cu124", ""]))
def test_gd4xx_never_crash_on_random_environments(env, nccl, torch):
    facts = {"env": env, "torch": {"nccl": nccl, "version": torch},
             "host": {"interfaces": [{"name": "eth0", "up": True, "addresses": ["10.0.0.1"]}], "ib_devices": []},
             "nvml": {"gpus": [{"name": "NVIDIA H100", "nvlink_active_links": 18}] * 2, "driver_version": "550.1",
                      "p2p_supported": True},
             "requests": {"tensor_parallel": [{"source": "x.py", "line": 1, "what": "tp", "size": 2,
                                               "frameworks": ["megatron"]}]}}
    rules = [rule for rule in load_catalog() if rule.id.startswith("GD4")]
    report = evaluate(Snapshot(facts=facts), rules)
    assert not [f for f in report.findings if f.rule == "GD001"], [f.message for f in report.findings]


@pytest.mark.parametrize("name,meant", [
    ("NCC_DEBUG", "NCCL_DEBUG"), ("NCLL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"), ("NCCCL_IB_HCA", "NCCL_IB_HCA"),
    ("NCLC_DEBUG", "NCCL_DEBUG"), ("TORCH_NCLL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"),
    ("RCCL_DEBUG", None), ("HCCL_DEBUG", None), ("CCL_DEBUG", None), ("CNCL_DEBUG", None),
    ("NCC_NOT_A_SETTING", None), ("NVCC_DEBUG", None),
])
def test_a_misspelt_nccl_prefix_is_caught(name, meant):
    report = run("GD401", {"env": {name: "1"}})
    assert [f.evidence.get("suggestion") for f in report.findings] == ([meant] if meant else [])


# --- GD445: a transport's settings beside the setting that switches it off -----------------------------------

def test_gd445_transports_name_only_documented_settings():
    """Every setting [[transport_off]] lists, and every switch, is a variable NCCL documents (rules/nccl_env.toml)."""
    documented = knowledge()["var"]
    for transport in knowledge()["transport_off"]:
        assert set(transport["reads"]) <= set(documented), transport["transport"]
        assert {off["name"] for off in transport["off"]} <= set(documented), transport["transport"]


@pytest.mark.parametrize("switch,fires", [
    ({"NCCL_IB_DISABLE": "1"}, True), ({"NCCL_IB_DISABLE": "0x1"}, True), ({"NCCL_IB_DISABLE": "0"}, False),
    ({"NCCL_IB_DISABLE": "true"}, False),  # NCCL's strtoll reads 0: IB stays on (GD402 says the value is wrong)
    ({"NCCL_NET": "socket"}, True), ({"NCCL_NET": "IB"}, False),
    ({"NCCL_NET": "AWS Libfabric"}, False),  # a plugin may read NCCL_IB_* itself: not known to be unused
])
def test_gd445_ib_switches_as_nccl_reads_them(switch, fires):
    report = run("GD445", {"env": {"NCCL_IB_HCA": "mlx5_0", **switch}, "env_sources": {}})
    assert bool(report.findings) is fires


def test_gd445_p2p_level_is_read_only_when_p2p_disable_is_not_one():
    assert run("GD445", {"env": {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "NVL"}, "env_sources": {}}).findings
    assert not run("GD445", {"env": {"NCCL_P2P_DISABLE": "2", "NCCL_P2P_LEVEL": "NVL"}, "env_sources": {}}).findings
