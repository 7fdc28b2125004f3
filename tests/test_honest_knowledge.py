"""A rule never passes on a knowledge-table row its sources do not fully verify, nor on a fact a message in the same
text contradicts: torch's capability warning prints the wheel's whole arch list."""

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.ingest.report import parse_report
from gpudoctor.knowledge import table, wheel_archs
from gpudoctor.snapshot import Snapshot

GD104 = [rule for rule in load_catalog() if rule.id == "GD104"]

# As torch prints it (torch/cuda/__init__.py _check_cubins) above a collect_env, on an RTX 5090 D
WARNING = """\
/opt/conda/lib/python3.12/site-packages/torch/cuda/__init__.py:235: UserWarning:
NVIDIA GeForce RTX 5090 D with CUDA capability sm_120 is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.
If you want to use the NVIDIA GeForce RTX 5090 D GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/
"""
COLLECT_ENV = """\
PyTorch version: {torch}
CUDA used to build PyTorch: {cuda}
Is CUDA available: True
GPU models and configuration: GPU 0: NVIDIA GeForce RTX 5090 D
Nvidia driver version: 570.124.04
"""


def _gd104(text: str):
    report = parse_report(text, "paste.txt")
    return evaluate(Snapshot(facts=report.facts), GD104)


def test_only_a_verified_row_decides():
    for row in table("torch_wheels")["wheel"]:
        assert row["status"] in ("verified", "partly verified", "unverified"), row
    torch_26 = COLLECT_ENV.format(torch="2.6.0+cu124", cuda="12.4")
    assert wheel_archs("2.6.0+cu124", "12.4")["status"] != "verified"
    (unknown,) = _gd104(torch_26).unknown
    assert unknown.missing == "torch.arch_list" and "partly verified" in unknown.reason


def test_the_cu126_wheel_of_torch_26_has_no_ptx_and_fails_sm_120():
    row = wheel_archs("2.6.0+cu126", "12.6")
    assert row["status"] == "verified" and row["ptx"] == [] and "12.0" not in row["archs"]
    (finding,) = _gd104(COLLECT_ENV.format(torch="2.6.0+cu126", cuda="12.6")).findings
    assert finding.evidence["cc"] == "12.0"


def test_the_warning_states_the_arch_list_and_the_rule_fails_on_it():
    report = parse_report(WARNING + COLLECT_ENV.format(torch="2.6.0+cu126", cuda="12.6"), "paste.txt")
    assert report.facts["torch"]["arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert "warning prints torch.cuda.get_arch_list()" in report.evidence["torch.arch_list"]
    (finding,) = evaluate(Snapshot(facts=report.facts), GD104).findings
    assert finding.evidence["arch_list_from"] == "torch.cuda.get_arch_list()"


def test_a_wrapped_arch_list_is_joined_and_a_mention_is_no_list():
    wrapped = "The current PyTorch install supports CUDA capabilities sm_50 sm_60\nsm_70 sm_75 compute_75.\n"
    assert parse_report(wrapped, "w").facts["torch"]["arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75",
                                                                      "compute_75"]
    prose = COLLECT_ENV.format(torch="2.6.0+cu126", cuda="12.6") + "It supports CUDA capabilities I guess.\n"
    assert "arch_list" not in parse_report(prose, "p").facts["torch"]


def test_an_rtx_5090_passes_on_the_cu128_wheel_of_torch_27_from_the_table():
    row = wheel_archs("2.7.0+cu128", "12.8")
    assert row["status"] == "verified" and "12.0" in row["archs"]
    outcome = _gd104(COLLECT_ENV.format(torch="2.7.0+cu128", cuda="12.8"))
    assert not outcome.findings and not outcome.unknown and outcome.passed



def _gd104_facts(torch: str, cuda: str, gpu: dict):
    facts = {"torch": {"version": torch, "status": "ok", "cuda": cuda, "cuda_available": True},
             "nvml": {"driver_version": "580.65.06", "status": "ok", "gpus": [{"index": 0, **gpu}]}}
    return evaluate(Snapshot(facts=facts), GD104)


def test_a_row_whose_ptx_is_in_doubt_decides_through_its_sass_alone():
    row = wheel_archs("2.13.0+cu130", "13.0")
    assert row["status"] == "partly verified" and row["verified"] == ["archs"] and row["ptx"] == ["12.0"]
    runs = _gd104_facts("2.13.0+cu130", "13.0", {"name": "NVIDIA GeForce RTX 5090"})  # sm_120 SASS
    assert runs.passed and not runs.unknown
    (too_old,) = _gd104_facts("2.13.0+cu130", "13.0", {"name": "Tesla V100-SXM2-32GB"}).findings  # no PTX helps
    assert too_old.evidence["cc"] == "7.0" and "compute_120" not in too_old.evidence["arch_list"]
    # a GPU of a major newer than 12 would run only through the PTX whose presence is disputed
    (unknown,) = _gd104_facts("2.13.0+cu130", "13.0", {"name": "a future GPU", "cc": "13.0"}).unknown
    assert unknown.missing == "torch.arch_list" and "disputed" in unknown.reason
    # where the sources verify the PTX too, the same GPU runs
    assert _gd104_facts("2.7.0+cu128", "12.8", {"name": "a future GPU", "cc": "13.0"}).passed
