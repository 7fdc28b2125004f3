"""The one list of pasted formats: the tool outputs `check --from`, `snapshot --from` and the MCP server's
`diagnose_text` read (a training job's log is read beside them, by gpudoctor.ingest.logs and the message atlas).

Each `Pasted` record says what the format is in words (`--from`'s help, the line for a text in which nothing is
recognised, docs/reports.md and the MCP tools list them from here), what it gives, the markers that find it in a
text, and its parser. A new format is a parser `parse(lines, name) -> Builder` in a module of gpudoctor.ingest and one
record here; tests/test_registries.py holds the lists of formats elsewhere against this one.

This module imports nothing but the standard library: the command line builds its help from it at every start, and
a parser's module is imported only when a text is read (`parser()`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Dict, Tuple


@dataclass(frozen=True)
class Pasted:
    """`kind`: the name in a report's parts and a snapshot's `source.formats`; `what`: the format in words; `parse`:
    "module.function" of gpudoctor.ingest, called with the normalized text (gpudoctor.ingest.normalize.Lines) and the
    text's name; `gives`: what gpudoctor takes from it (docs/reports.md); `markers`: regular expressions searched
    in the lower-cased text, each starting with a literal (the engine's fast scan; see gpudoctor.ingest.detect), the
    earliest match ordering the parts; `hint`: a part read after the others (a message that completes a report)."""

    kind: str
    what: str
    parse: str
    gives: str
    markers: Tuple[str, ...]
    hint: bool = False

    def parser(self) -> Callable:
        module, function = self.parse.rsplit(".", 1)
        return getattr(importlib.import_module(f"gpudoctor.ingest.{module}"), function)


FORMATS: Tuple[Pasted, ...] = (  # in the order help texts and docs list them
    Pasted("collect_env", "collect_env", "collect_env.parse",
           gives="PyTorch's `python -m torch.utils.collect_env`: torch and its CUDA build, the driver, the GPUs, "
                 "nvcc, the OS and Python, the relevant libraries",
           markers=(r"collecting environment information", r"pytorch version[ \t]*:",
                    r"cuda used to build pytorch[ \t]*:", r"rocm used to build pytorch[ \t]*:",
                    r"is cuda available[ \t]*:", r"gpu models and configuration[ \t]*:",
                    r"nvidia driver version[ \t]*:", r"cuda runtime version[ \t]*:", r"relevant libraries[ \t]*:")),
    Pasted("ds_report", "ds_report", "ds_report.parse",
           gives="DeepSpeed, torch and nvcc versions, and which ops are built or compatible",
           markers=(r"deepspeed c\+\+/cuda extension op report", r"deepspeed general environment info",
                    r"torch version[ \t]*\.{3}", r"deepspeed info[ \t]*\.{3}", r"torch cuda version[ \t]*\.{3}",
                    r"nvcc version[ \t]*\.{3}", r"deepspeed wheel compiled w\.[ \t]*\.{3}",
                    r"\][ \t]{0,5}\.{1,60}[ \t]{0,5}\[(?:okay|no|yes|fail)\]")),
    Pasted("nvidia_smi", "nvidia-smi", "nvidia_smi.parse_table",
           gives="its table or `-L`: the driver and the CUDA it supports, the GPUs (model, memory, MIG, processes)",
           markers=(r"nvidia-smi[ \t]+\d", r"driver version:[ \t]*\d", r"\|[ \t]{1,20}gpu[ \t]{1,20}name\b",
                    r"\(uuid:[ \t]*gpu-")),
    Pasted("nvidia_smi_q", "nvidia-smi -q", "nvidia_smi_query.parse_q",
           gives="the driver, each GPU's model, memory, ECC errors, retired pages and processes",
           markers=(r"nvsmi log", r"driver version[ \t]+:", r"kmd version[ \t]+:", r"attached gpus[ \t]+:")),
    Pasted("nvidia_smi_xml", "nvidia-smi -q -x", "nvidia_smi_query.parse_xml",
           gives="the same as nvidia-smi -q, from its XML",
           markers=(r"<nvidia_smi_log\b",)),
    Pasted("nvidia_smi_error", "nvidia-smi's errors", "nvidia_smi.parse_error",
           gives="that the driver cannot be reached, and why (no driver loaded, a driver/library mismatch, no "
                 "devices)",
           markers=(r"failed to initialize nvml",
                    r"communicate[ \t\n]{1,20}with[ \t\n]{1,20}the[ \t\n]{1,20}nvidia[ \t\n]{1,20}driver",
                    r"no devices were found", r"find libnvidia-ml",
                    r"unable to determine the device handle for gpu")),
    Pasted("nvidia_smi_topo", "nvidia-smi topo", "topology.parse",
           gives="`topo -m` or `topo -p2p r`: how each pair of GPUs is joined (NV#, PIX, PXB, PHB, NODE, SYS) and "
                 "whether the driver allows P2P between them (GD412); also the `GPU Topology:` of `vllm collect-env`",
           markers=(r"gpu0[ \t]+gpu1[ \t]", r"gpu0[ \t]+nic0", r"gpu0[ \t]+cpu affinity",
                    r"connection traversing pcie", r"chipset not supported")),
    Pasted("nvcc", "nvcc --version", "nvcc.parse",
           gives="the CUDA toolkit's version",
           markers=(r"cuda compilation tools,[ \t]*release", r"cuda compiler driver")),
    Pasted("pip_show", "pip show", "pip_show.parse",
           gives="`pip show torch` (deepspeed, nvidia-nccl-cu12): the package's version, or that it is not installed",
           markers=(r"name:[ \t]{0,5}(?:torch|pytorch|deepspeed|nvidia-nccl-cu\d{2})[ \t]*(?:\n|$)",
                    r"package\(s\) not found:")),
    Pasted("package_list", "pip/conda list", "packages.parse",
           gives="`pip list`, `pip freeze` or `conda list`: torch and its CUDA build (a wheel tag, a conda build "
                 "string), DeepSpeed, the `nvidia-*` wheels (cuDNN, cuBLAS, NCCL …)",
           markers=(r"package[ \t]+version[ \t]*\n", r"# name[ \t]+version[ \t]+build", r"torch==",
                    r"nvidia-cudnn-cu1", r"nvidia-nccl-cu1", r"nvidia-cublas-cu1")),
    Pasted("env_command", "transformers/accelerate/llamafactory-cli env", "env_commands.parse",
           gives="torch's version and whether it sees CUDA, the GPU model (and count, memory), DeepSpeed's version",
           markers=(r"- pytorch version", r"- gpu type:", r"`transformers` version", r"`accelerate` version",
                    r"`llamafactory` version")),
    Pasted("nccl_tests", "nccl-tests", "nccl_tests.parse",
           gives="`all_reduce_perf` and the other tests: the sizes, bus bandwidth, `#wrong` and `Out of bounds "
                 "values` (GD701, GD412), and its `Test CUDA failure … 'system not yet initialized'` (CUDA error "
                 "802: the fabric manager, GD105)",
           markers=(r"# nthread", r"avg bus bandwidth", r"out of bounds values", r"test cuda failure",
                    r"test nccl failure")),
    Pasted("library_path", "ldconfig -p/LD_LIBRARY_PATH", "libpath.parse",
           gives="`ldconfig -p` or `LD_LIBRARY_PATH=…` lines: the system's cuDNN/cuBLAS/NCCL and the library path "
                 "ahead of torch's wheels (GD111)",
           markers=(r"\(libc6", r"ld_library_path")),
    Pasted("torch_warning", "torch's CUDA warnings", "collect_env.parse_torch_warnings",
           gives="the driver version torch found too old, and `supports CUDA capabilities sm_50 … sm_90`: the "
                 "wheel's whole arch list (GD104)",
           markers=(r"found version[ \t\n]{1,5}\d{4,6}", r"driver on your system is too old",
                    r"found no nvidia driver on your system", r"supports cuda capabilities[ \t]"), hint=True),
)
BY_KIND: Dict[str, Pasted] = {fmt.kind: fmt for fmt in FORMATS}
LOGS = "a training job's log"
# Several files, a folder or a glob are read as one run: every rank's logs and torch's flight-recorder dumps
# (gpudoctor.ingest.run), each file of it read as one of the formats above or as a log.
RUN = "a run's folder (every rank's logs and flight-recorder dumps)"


def in_words() -> str:
    """Every format, as the help texts and messages list them."""
    return ", ".join(fmt.what for fmt in FORMATS) + ", " + LOGS + ", or " + RUN


def markdown_table() -> str:
    """The table of formats in docs/reports.md."""
    rows = ["| format | what it gives |", "| --- | --- |"]
    rows += [f"| {fmt.what} | {fmt.gives} |" for fmt in FORMATS]
    return "\n".join(rows) + "\n"
