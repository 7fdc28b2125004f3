"""GD437 and its reader: the NCCL topology file a job file's NCCL_TOPO_FILE names, read beside the job file."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.readers.registry import read_file
from gpudoctor.readers.topology_file import read_topology
from gpudoctor.snapshot import Snapshot

TOPOLOGY = FIXTURES / "launch" / "topology"
GD437 = [rule for rule in load_catalog() if rule.id == "GD437"]


def lint(path):
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    read_file(path, snapshot)
    return snapshot, evaluate(snapshot, GD437)


def found(report):
    return [(str(f.severity), f.location.line) for f in report.findings]


@pytest.mark.parametrize("text, error, fatal", [
    ('<system version="1"><cpu><pci class="0x030200"/></cpu></system>', None, False),
    ('<!-- a comment first, as aws-ofi-nccl ships them -->\n<system version="1"/>', None, False),
    ('<system version="2"><cpu/></system>', "wrong version", True),
    ("<system><cpu/></system>", "no version", True),
    ('<topology version="1"><system/></topology>', "not <system>", False),
    ('<system version="1"><cpu></system>', "not well-formed", True),
    ('<!DOCTYPE x [<!ENTITY a "aaaa">]><system version="1">&a;</system>', "DTD", True),
])
def test_what_nccl_makes_of_a_topology_text(text, error, fatal):
    read = read_topology(text)
    assert (read["error"] is None) == (error is None) and read["fatal"] is fatal
    if error:
        assert error in read["error"]


def test_gpus_and_nics_counted_by_pci_class_or_element():
    dump = read_topology((TOPOLOGY / "topo-4gpu.xml").read_text())
    assert (dump["gpus"], dump["nics"], dump["version"]) == (4, 2, "1")
    partial = read_topology('<system version="1"><cpu><gpu dev="0"/><gpu dev="1"/><nic/></cpu></system>')
    assert (partial["gpus"], partial["nics"]) == (2, 1)


def test_a_topology_dumped_on_a_4_gpu_machine_in_an_8_gpu_job():
    snapshot, report = lint(TOPOLOGY / "train_8gpu.sbatch")
    assert found(report) == [("warning", 6)]
    assert "describes 4 GPU(s) and 2 NIC(s), but the job gives each node 8 GPU(s)" in report.findings[0].message
    entry, = snapshot.facts["topology_files"]
    assert entry["read"].endswith("topo-4gpu.xml") and entry["written"] == "/shared/llama/topo-4gpu.xml"
    _, report = lint(TOPOLOGY / "train_4gpu.sbatch")  # the machines it was dumped on
    assert not report.findings and "GD437" in report.passed


def test_a_topology_written_by_hand_that_nccl_cannot_parse():
    _, report = lint(TOPOLOGY / "by_hand.sbatch")
    assert found(report) == [("error", 5)] and "not well-formed XML" in report.findings[0].message


def test_a_topology_file_beside_efa_keeps_the_plugin_s_own_out():
    _, report = lint(TOPOLOGY / "efa_p4d.sbatch")
    assert found(report) == [("info", 8)] and "aws-ofi-nccl" in report.findings[0].message


def test_a_topology_only_on_the_nodes_is_unknown(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --gpus-per-node=8\nexport NCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml\n"
                   "torchrun --nproc_per_node=8 train.py\n")
    _, report = lint(job)
    assert not report.findings and [item.rule for item in report.unknown] == ["GD437"]
    job.write_text("#!/bin/bash\ntorchrun --nproc_per_node=8 train.py\n")  # no NCCL_TOPO_FILE: nothing to judge
    _, report = lint(job)
    assert not report.findings and not report.unknown
