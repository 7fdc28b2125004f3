"""The formats users paste beside collect_env: nvidia-smi topo, nccl-tests, the Hugging Face `env` commands, package
lists, ldconfig and LD_LIBRARY_PATH — found anywhere in a text, as their producers print them."""

import json

import pytest
from conftest import ROOT

from gpudoctor.ingest.report import parse_report

TOPO = """$ nvidia-smi topo -m
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-23\t0
GPU1\tPIX\t X \tSYS\tSYS\t0-23\t0
GPU2\tSYS\tSYS\t X \tPIX\t24-47\t1
GPU3\tSYS\tSYS\tPIX\t X \t24-47\t1

Legend:
  X    = Self
$ nvidia-smi topo -p2p r
 \tGPU0\tGPU1\tGPU2\tGPU3
 GPU0\tX\tOK\tCNS\tCNS
 GPU1\tOK\tX\tCNS\tCNS
 GPU2\tCNS\tCNS\tX\tOK
 GPU3\tCNS\tCNS\tOK\tX
"""
NVLINK = ("        GPU0    GPU1    NIC0    CPU Affinity\nGPU0     X      NV12    SYS     0-47\n"
          "GPU1    NV12     X      SYS     0-47\n")
NCCL_TESTS = """\x1b[0m$ ./build/all_reduce_perf -b 128M -e 128M -g 2\r
# nThread 1 nGpus 2 minBytes 134217728 maxBytes 134217728 step: 1048576(bytes) warmup iters: 5 iters: 20 validation: 1\r
#  Rank  0 Group  0 Pid  12345 on  node1 device  0 [0x18] NVIDIA H100 80GB HBM3\r
#  Rank  1 Group  0 Pid  12345 on  node1 device  1 [0x2a] NVIDIA H100 80GB HBM3\r
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\r
   134217728      33554432     float     sum      -1    712.3  188.43  188.43      5    710.1  189.01  189.01    N/A\r
# Out of bounds values : 5 FAILED\r
# Avg bus bandwidth    : 188.7\r
"""
HF_ENV = """Copy-and-paste the text below in your GitHub issue and FILL OUT the two last points.

- `transformers` version: 4.41.2
- Platform: Linux-5.15.0-107-generic-x86_64-with-glibc2.35
- DeepSpeed version: not installed
- PyTorch version (GPU?): 2.3.0+cu121 (True)
- GPU type: Tesla V100-SXM2-32GB
"""
LLAMA_FACTORY = """```
- `llamafactory` version: 0.8.2
- PyTorch version: 2.3.0+cu121 (GPU)
- GPU type: NVIDIA A800-SXM4-80GB
- GPU number: 8
- GPU memory: 79.33GB
- DeepSpeed version: 0.14.0
```"""
PIP_LIST = """Package                  Version
------------------------ ------------
torch                    2.3.0+cu121
nvidia-cudnn-cu12        8.9.2.26
nvidia-nccl-cu12         2.20.5
"""
CONDA_LIST = """# packages in environment at /opt/conda:
#
# Name                    Version                   Build  Channel
pytorch                   2.1.0           py3.10_cuda11.8_cudnn8.7.0_0    pytorch
"""
LDCONFIG = """\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8
\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
export LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64:$LD_LIBRARY_PATH
"""


def test_topology_links_and_p2p_read():
    topology = parse_report("Here is my topology:\n" + TOPO + "thanks", "t").facts["nvml"]["topology"]
    assert topology["links"]["0"] == {"1": "PIX", "2": "SYS", "3": "SYS"} and topology["pcie_only"] is True
    assert topology["p2p_read"]["1"] == {"0": "OK", "2": "CNS", "3": "CNS"}
    assert parse_report(NVLINK, "n").facts["nvml"]["topology"] == {"links": {"0": {"1": "NV12"}, "1": {"0": "NV12"}},
                                                                   "pcie_only": False}


def test_nccl_tests_rows_and_verdicts():
    result = parse_report(NCCL_TESTS, "n").facts["bench"]["nccl"]
    assert (result["op"], result["world_size"], result["out_of_bounds"]) == ("all_reduce", 2, 5)
    (row,) = result["rows"]
    assert (row["bytes"], row["busbw_gbps"], row["wrong"]) == (134217728, 188.43, 5)
    assert result["summary"]["avg_busbw_gbps"] == 188.7


def test_nccl_tests_failure_line():
    text = "node1: Test CUDA failure common.cu:941 'system not yet initialized'\n .. node1 pid 9: Test failure\n"
    failure = parse_report(text, "f").facts["bench"]["nccl"]["failure"]
    assert failure == {"library": "CUDA", "where": "common.cu:941", "error": "system not yet initialized",
                       "line": "node1: Test CUDA failure common.cu:941 'system not yet initialized'"}


def test_transformers_env():
    facts = parse_report(HF_ENV, "e").facts
    assert facts["torch"]["version"] == "2.3.0+cu121" and facts["torch"]["cuda_available"] is True
    assert facts["torch"]["deepspeed"] == {"version": None}
    assert facts["nvml"]["gpus"] == [{"index": 0, "name": "Tesla V100-SXM2-32GB"}]
    # no `GPU number`: device 0 is named, how many is not said
    assert facts["nvml"]["gpus_counted"] is False and facts["nvml"]["health_read"] is False


def test_llama_factory_env():
    report = parse_report(LLAMA_FACTORY, "l")
    assert report.facts["torch"]["deepspeed"]["version"] == "0.14.0" and report.facts["torch"]["device_count"] == 8
    gpus = report.facts["nvml"]["gpus"]
    assert len(gpus) == 8 and gpus[7]["name"] == "NVIDIA A800-SXM4-80GB" and gpus[0]["memory_total_bytes"] > 79 * 2**30
    assert "same model" in report.evidence["nvml.gpus"] and not report.conflicts
    assert "gpus_counted" not in report.facts["nvml"]


SMI_TABLE = """+-----------------------------------------------------------------------------+
| NVIDIA-SMI 455.23.04    Driver Version: 455.23.04    CUDA Version: 11.1     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce RTX 3090    Off  | 00000000:01:00.0 Off |                  N/A |
|  0%   56C    P0    43W / 350W |      0MiB / 24267MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
SMI_L = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5c6a8f0e-0b1e-4c1e-9e0a-1d2c3b4a5f60)\n"


def _verdicts(run_cli, tmp_path, text: str, rules: str, *options) -> dict:
    paste = tmp_path / "paste.txt"
    paste.write_text(text)
    _code, out, _ = run_cli("check", "--from", paste, "--select", rules, "--format", "json", "--fail-on", "never",
                            *options)
    report = json.loads(out)
    verdicts = {u["rule"]: ("unknown", u["missing"]) for u in report["unknown"]}
    verdicts.update({rule: ("passed", None) for rule in report["passed"]})
    verdicts.update({f["rule"]: ("fired", None) for f in report["findings"]})
    return verdicts


def test_a_gpu_count_the_paste_does_not_state_stays_unknown(run_cli, tmp_path):
    """`GPU type` without `GPU number` names device 0: GD405 judges two or more GPUs and cannot pass on one."""
    assert _verdicts(run_cli, tmp_path, HF_ENV, "GD405")["GD405"] == ("unknown", "nvml.gpus_counted")
    one = LLAMA_FACTORY.replace("GPU number: 8", "GPU number: 1")
    assert _verdicts(run_cli, tmp_path, one, "GD405")["GD405"] == ("passed", None)


def test_the_machine_line_says_how_many_gpus_only_where_the_paste_does():
    from gpudoctor.facts import Facts
    from gpudoctor.render.describe import machine_line
    assert machine_line(Facts(parse_report(HF_ENV, "e").facts)).endswith("how many not stated")
    assert machine_line(Facts(parse_report(LLAMA_FACTORY, "l").facts)).startswith("8× NVIDIA A800-SXM4-80GB")


def test_an_environment_the_paste_does_not_show_is_not_taken_to_be_unset(run_cli, tmp_path):
    """Two RTX 4090s whose P2P is broken before driver 550.40.07: NCCL_P2P_DISABLE decides GD405, and a paste does
    not show the job's environment; the .env given beside it does."""
    rtx = LLAMA_FACTORY.replace("GPU number: 8", "GPU number: 2").replace("A800-SXM4-80GB", "GeForce RTX 4090")
    assert _verdicts(run_cli, tmp_path, rtx, "GD405")["GD405"] == ("unknown", "env")
    env_file = tmp_path / "job.env"
    env_file.write_text("NCCL_P2P_DISABLE=1\n")
    assert _verdicts(run_cli, tmp_path, rtx, "GD405", "--env-file", env_file)["GD405"] == ("passed", None)
    env_file.write_text("OMP_NUM_THREADS=8\n")
    assert _verdicts(run_cli, tmp_path, rtx, "GD405", "--env-file", env_file)["GD405"][0] == "fired"


@pytest.mark.parametrize("text,verdict", [(HF_ENV, "unknown"), (SMI_L, "unknown"), (LLAMA_FACTORY, "unknown"),
                                          (SMI_TABLE, "passed"), (SMI_TABLE.replace("N/A |\n|  0%", "  3 |\n|  0%"),
                                                                  "fired")])
def test_gpu_health_passes_only_where_the_paste_states_it(run_cli, tmp_path, text, verdict):
    """Names alone (nvidia-smi -L, an env command) say nothing of ECC or remaps; nvidia-smi's table does, N/A
    (a GPU without ECC) included."""
    assert _verdicts(run_cli, tmp_path, text, "GD506")["GD506"][0] == verdict


def test_a_report_cut_short_states_neither_the_gpu_count_nor_the_health_it_stops_in(run_cli, tmp_path):
    """nvidia-smi -q -x cut inside GPU 0's ECC counters: ECC is on, its error counts were never shown."""
    xml = (ROOT / "fixtures" / "reports" / "nvidia_smi_q_x_truncated.xml").read_text()
    verdicts = _verdicts(run_cli, tmp_path, xml, "GD405,GD506")
    assert verdicts == {"GD405": ("unknown", "nvml.gpus_counted"), "GD506": ("unknown", "nvml.gpus.health_read")}


@pytest.mark.parametrize("text,verdict", [(PIP_LIST, "unknown"), (CONDA_LIST, "unknown"), ("torch==2.4.1\n", "unknown"),
                                          (HF_ENV, "passed")])
def test_a_package_list_does_not_show_import_torch_working(run_cli, tmp_path, text, verdict):
    """GD108 judges `import torch`: a package list shows torch installed; an env command ran the import."""
    assert _verdicts(run_cli, tmp_path, text, "GD108")["GD108"][0] == verdict


def test_nccl_tests_that_stopped_before_the_first_size_pass_nothing_about_its_results(run_cli, tmp_path):
    """`Test CUDA failure …` alone measured nothing: no verdict on wrong values, bandwidth or a corrupting P2P path;
    a run that measured its sizes is judged."""
    failed = "node1: Test CUDA failure common.cu:941 'system not yet initialized'\n .. node1 pid 9: Test failure\n"
    verdicts = _verdicts(run_cli, tmp_path, failed, "GD412,GD701,GD702")
    assert {rule: verdict[0] for rule, verdict in verdicts.items()} == dict.fromkeys(("GD412", "GD701", "GD702"),
                                                                                       "unknown")
    healthy = NCCL_TESTS.replace("      5    710.1", "      0    710.1").replace("5 FAILED", "0 OK")
    assert _verdicts(run_cli, tmp_path, healthy, "GD701")["GD701"] == ("passed", None)
    assert _verdicts(run_cli, tmp_path, NCCL_TESTS, "GD701")["GD701"][0] == "fired"


SOCKETS = """node-a:3001:3060 [0] NCCL INFO Using network Socket
node-b:7002:7070 [0] NCCL INFO Using network Socket
"""


@pytest.mark.parametrize("text,verdict", [
    (SOCKETS, "unknown"),
    ("node-a:3001:3060 [0] NCCL INFO NET/IB : No device found.\nnode-b:7002:7070 [0] NCCL INFO NET/IB : No device "
     "found.\n" + SOCKETS, "passed"),
    ("node-a:3001:3001 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n" + SOCKETS, "fired"),
])
def test_sockets_between_nodes_pass_only_where_the_paste_says_there_is_no_fast_network(run_cli, tmp_path, text,
                                                                                       verdict):
    """Two nodes on NET/Socket: fine on an Ethernet-only cluster, a fallback where IB was meant; a log that says
    neither leaves GD420 unknown."""
    assert _verdicts(run_cli, tmp_path, text, "GD420")["GD420"][0] == verdict


@pytest.mark.parametrize("versions,verdict", [((), "unknown"), (("2.18.1",), "unknown"),
                                              (("2.18.1", "2.18.1"), "passed"), (("2.18.1", "2.21.5"), "fired")])
def test_nccl_versions_agree_only_where_the_log_shows_every_hosts(run_cli, tmp_path, versions, verdict):
    """NCCL prints `NCCL version …` on rank 0: a log without the other host's line does not show they agree."""
    shown = "".join(f"{host}:1:1 [0] NCCL INFO NCCL version {v}+cuda12.1\n" for host, v in zip(("node-a", "node-b"),
                                                                                              versions))
    assert _verdicts(run_cli, tmp_path, shown + SOCKETS, "GD422")["GD422"][0] == verdict


@pytest.mark.parametrize("interfaces,verdict", [((), "unknown"), (("eth0",), "unknown"), (("eth0", "eth0"), "passed"),
                                                (("eth0", "docker0"), "fired")])
def test_nccl_interfaces_pass_only_where_the_log_shows_each_hosts(run_cli, tmp_path, interfaces, verdict):
    """GD423 judges the interface NCCL used on each host: a host whose `Bootstrap : Using …` line is not in the paste
    is not shown to be on the right network."""
    shown = "".join(f"{host}:1:1 [0] NCCL INFO Bootstrap : Using {name}:10.0.0.{i}<0>\n"
                    for i, (host, name) in enumerate(zip(("node-a", "node-b"), interfaces)))
    assert _verdicts(run_cli, tmp_path, shown + SOCKETS, "GD423")["GD423"][0] == verdict


RANK0 = ("node1:981:981 [0] NCCL INFO Bootstrap : Using bond0:192.168.1.161<0>\n"
         "node1:981:981 [0] NCCL INFO NET/Socket : Using [0]bond0:192.168.1.161<0> [1]br-05ab815fa14e:172.19.0.1<0> "
         "[2]veth6163fba:fe80::b878:6cff:fe52:abe2%veth6163fba<0>\n"
         "node1:981:981 [0] NCCL INFO Using network Socket\n")


@pytest.mark.parametrize("more,verdict", [
    ("", ("unknown", "logs.hosts.nodes_in_run")),  # rank 0's log alone: one host, not the run's extent
    ("node1:981:990 [0] NCCL INFO Channel 00/0 : 7[7] -> 0[0] [receive] via NET/Socket/0\n", ("fired", None)),
    ("node1:981:990 [0] NCCL INFO comm 0x55e0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n",
     ("fired", None)),
    ("node1:981:990 [0] NCCL INFO comm 0x55e0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n",
     ("passed", None)),
    ("node1:981:990 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n", ("passed", None))])
def test_one_hosts_log_judges_its_interfaces_by_the_runs_extent(run_cli, tmp_path, more, verdict):
    """A log that names one host (rank 0's, pasted alone) is a one-node run only where NCCL shows it (`nNodes 1`,
    channels within the host); `nNodes 2` or a channel `via NET/…` makes its Docker bridges in the socket list wrong;
    neither leaves GD423 unknown, never passed (a real paste: NVIDIA/nccl#697, solved by NCCL_SOCKET_IFNAME=bond0)."""
    assert _verdicts(run_cli, tmp_path, RANK0 + more, "GD423")["GD423"] == verdict


@pytest.mark.parametrize("text,torch,cuda", [(PIP_LIST, "2.3.0+cu121", "12.1"), (CONDA_LIST, "2.1.0", "11.8"),
                                             ("torch==2.4.1\nnvidia-cublas-cu12==12.1.3.1\n", "2.4.1", None)])
def test_package_lists(text, torch, cuda):
    facts = parse_report(text, "p").facts["torch"]
    assert facts["version"] == torch and facts.get("cuda") == cuda
    if "nvidia" in text:
        assert facts["cuda_wheels"]


def test_ldconfig_and_library_path():
    facts = parse_report(LDCONFIG, "l").facts
    assert facts["host"]["libraries"] == [{"name": "libcudnn.so.8", "library": "cudnn", "version": "8",
                                           "path": "/usr/lib/x86_64-linux-gnu/libcudnn.so.8"}]
    assert facts["env"]["LD_LIBRARY_PATH"] == "/usr/local/cuda-11.8/lib64:$LD_LIBRARY_PATH"


def test_formats_in_one_paste_merge():
    report = parse_report(HF_ENV + "\n" + PIP_LIST + "\n" + TOPO, "all")
    assert {"env_command", "package_list", "nvidia_smi_topo"} <= set(report.parts) and not report.conflicts


@pytest.mark.parametrize("line,library", [
    ("ImportError: /venv/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
     "nccl"),
    ("OSError: /venv/lib/python3.10/site-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: undefined "
     "symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12", "nvjitlink"),
    ("RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) but found runtime version "
     "(8, 5, 0). PyTorch already comes bundled with cuDNN.", "cudnn"),
])
def test_a_shadowing_cuda_library_in_a_log_is_gd111(run_cli, tmp_path, line, library):
    log = tmp_path / "train.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n" + line + "\n")
    code, out, _ = run_cli("check", "--from", log, "--select", "GD111", "--format", "json")
    (finding,) = json.loads(out)["findings"]
    assert finding["rule"] == "GD111" and finding["evidence"]["library"] == library


def test_an_undefined_symbol_of_torch_itself_is_not_gd111(run_cli, tmp_path):
    log = tmp_path / "ext.log"
    log.write_text("ImportError: /venv/site-packages/flash_attn_2_cuda.so: "
                   "undefined symbol: _ZN3c104cuda9SetDeviceEi\n")
    code, out, _ = run_cli("check", "--from", log, "--select", "GD111", "--format", "json")
    assert json.loads(out)["findings"] == []


P2P_HANG = """ws-01:1234:1300 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC
ws-01:1234:1301 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC
ws-01:1234:1300 [0] NCCL INFO Connected all rings
[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, \
OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600231 milliseconds before timing out.
"""


@pytest.mark.parametrize("seq,fires", [(1, True), (4000, False)])
def test_a_hang_at_the_first_collective_over_p2p_is_gd412(run_cli, tmp_path, seq, fires):
    log = tmp_path / "rank0.log"
    log.write_text(P2P_HANG.format(seq=seq))
    code, out, _ = run_cli("check", "--from", log, "--select", "GD412", "--format", "json")
    report = json.loads(out)
    assert [f["rule"] for f in report["findings"]] == (["GD412"] if fires else [])
    if fires:
        assert report["findings"][0]["severity"] == "error" and "P2P/IPC" in report["findings"][0]["message"]
    else:
        assert report["passed"] == ["GD412"]


# vllm/collect_env.py: torch's collect_env, then "vLLM Version", "vLLM Build Flags:" and "GPU Topology:\n  {gpu_topo}"
VLLM_COLLECT_ENV = """Collecting environment information...
PyTorch version: 2.4.0+cu121
CUDA used to build PyTorch: 12.1
GPU models and configuration:
GPU 0: NVIDIA A100-SXM4-80GB
GPU 1: NVIDIA A100-SXM4-80GB

Nvidia driver version: 535.129.03
vLLM Version: 0.6.3.post1
vLLM Build Flags:
CUDA Archs: Not Set; ROCm: Disabled; Neuron: Disabled
GPU Topology:
  GPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV12\t0-63\t0\t\tN/A
GPU1\tNV12\t X \t0-63\t0\t\tN/A
"""


def test_vllm_collect_env_adds_its_gpu_topology():
    report = parse_report(VLLM_COLLECT_ENV, "vllm")
    assert {"collect_env", "nvidia_smi_topo"} <= set(report.parts)
    assert report.facts["nvml"]["topology"]["links"] == {"0": {"1": "NV12"}, "1": {"0": "NV12"}}
    assert report.facts["torch"]["version"] == "2.4.0+cu121" and len(report.facts["nvml"]["gpus"]) == 2


def test_gd111_on_a_snapshot_without_wheels_says_why_in_words(run_cli):
    """A snapshot that does not record torch's nvidia-* wheels leaves GD111 unknown with a reason a user reads."""
    code, out, _ = run_cli("check", "--snapshot", "fixtures/machines/t4-cu121.json", "--select", "GD111",
                           "--format", "json")
    (unknown,) = json.loads(out)["unknown"]
    assert unknown["missing"] == "torch.cuda_wheels" and "pip list" in unknown["reason"]
    code, out, _ = run_cli("check", "--snapshot", "fixtures/machines/t4-cu121.json", "--select", "GD111")
    assert "cuda wheels not known" not in out and "nvidia-* library wheels are not known" in " ".join(out.split())


def test_an_unknown_with_its_reason_is_not_counted_again_under_its_fact_group(run_cli, tmp_path):
    """GD111 says why torch's wheels are unknown; the summary does not add 'torch: cuda wheels not known' beside it."""
    paste = tmp_path / "collect_env.txt"
    paste.write_text("PyTorch version: 2.5.1+cu121\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n"
                     "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\n"
                     "Nvidia driver version: 535.183.01\n")
    code, out, _ = run_cli("check", "--from", paste)
    text = " ".join(out.split())
    assert "nvidia-* library wheels are not known" in text and "cuda wheels not known" not in text
