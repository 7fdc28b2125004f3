"""The atlas of messages (rules/messages/*.toml, gpudoctor.ingest.atlas): every entry's real samples fire its rule when
pasted, through the log reader's byte prefilter; near-miss lines fire nothing; docs/messages.md is generated from it."""

import io

import pytest
from conftest import ROOT

from gpudoctor.api import evaluate
from gpudoctor.catalog import load_catalog
from gpudoctor.ingest import atlas
from gpudoctor.ingest.logs import ANCHORS
from gpudoctor.ingest.source import snapshot_from_reports
from gpudoctor.model import Severity

SAMPLES = [pytest.param(m, s, id=f"{m.id}-{i}") for m in atlas.messages() for i, s in enumerate(m.samples)]


def pasted(text: str):
    return evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode())))


def test_the_atlas_is_large_and_its_entries_well_formed():
    messages = atlas.messages()
    rules = {rule.id: rule for rule in load_catalog()}
    assert len({m.id for m in messages}) == len(messages)
    for m in messages:
        assert m.anchor.encode() in ANCHORS, f"{m.id}: anchor {m.anchor!r} is not one of the log reader's ANCHORS"
        assert m.anchor in m.trigger or m.anchor in m.pattern.pattern or m.samples, m.id
        assert m.rule in rules and m.samples, m.id
        assert all(s.source.startswith("https://") for s in m.samples), m.id
        assert not m.fix or m.fix in rules[m.rule].docs.get("fixes", {}), f"{m.id}: {m.rule} has no fix case {m.fix}"


@pytest.mark.parametrize("message,sample", SAMPLES)
def test_each_sample_passes_the_prefilter_and_fires_its_rule(message, sample):
    text = sample.text.splitlines()
    read = [f"{line} {following.strip()}" if message.wraps else line for line, following in zip(text, text[1:] + [""])]
    lines = [line for line, seen in zip(text, read) if message.pattern.search(seen)]
    assert lines, f"{message.id}: no line of the sample matches the pattern"
    assert any(message.anchor in line and message.trigger in line for line in lines), \
        f"{message.id}: the matching line lacks the anchor {message.anchor!r} or the trigger"
    report = pasted(sample.text)
    assert message.rule in {f.rule for f in report.findings}, [f.rule for f in report.findings]
    if message.fix:  # the message's own remedy, not the rule's general one
        rule = next(rule for rule in load_catalog() if rule.id == message.rule)
        assert {f.fix.summary for f in report.findings if f.rule == message.rule} == {rule.fix_text(message.fix)}


@pytest.mark.parametrize("near", atlas.near_misses(), ids=lambda n: n.text[:50])
def test_near_miss_lines_fire_nothing(near):
    report = pasted(near.text)
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], near.why


def test_a_message_states_its_facts_to_the_rules():
    """torch's capability warning gives the arch list to the rules, as torch.cuda.get_arch_list() would."""
    report = pasted("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
                    "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 "
                    "sm_80 sm_86 sm_90.\n")
    assert report.facts["torch"]["arch_list"] == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert "line 2" in report.evidence["torch.arch_list"]


def test_docs_messages_is_generated_from_the_atlas():
    assert (ROOT / "docs" / "messages.md").read_text(encoding="utf-8") == atlas.render(), \
        "regenerate: python -m gpudoctor.ingest.atlas > docs/messages.md"


def test_lines_no_anchor_admits_are_never_decoded_nor_matched(monkeypatch):
    """The prefilter's cost does not grow with the atlas: a line that holds no anchor reaches no reader."""
    from gpudoctor.ingest import logs

    read = []
    monkeypatch.setattr(logs.LogScanner, "_line", lambda self, name, line_no, raw, anchors=(): read.append(line_no))
    ordinary = b"{'loss': 2.0312, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.01}\n"
    logs.LogScanner().feed("train.log", ordinary * 500 + b"NCCL WARN Call to bind failed\n" + ordinary * 500)
    assert read == [501]


def test_the_trigger_gate_picks_what_trying_each_entry_picks():
    """atlas.match searches an anchor's triggers at once; it finds the entry that trying each in turn would."""
    def each_in_turn(line, anchors):  # no text above the line: the entries that need one stand aside
        for anchor in anchors:
            for message in atlas.by_anchor().get(anchor, ()):
                if message.trigger in line and not message.after and message.pattern.search(line):
                    return message
        return None

    lines = [line for m in atlas.messages() for s in m.samples for line in s.text.splitlines()]
    lines += [line for near in atlas.near_misses() for line in near.text.splitlines()]
    for line in lines:
        anchors = tuple(word.decode() for word in ANCHORS if word.decode() in line)
        found = atlas.match(line, anchors)
        assert (found[0] if found else None) == each_in_turn(line, anchors), line
    assert sum(atlas.match(line, tuple(a.decode() for a in ANCHORS)) is not None for line in lines) >= len(SAMPLES)


def test_a_message_that_needs_its_context_reads_it_above_the_line():
    """torch missing under pip's isolated build is the build's (GD301, build isolation); the same line alone is the
    interpreter's (GD110). Source: https://github.com/vllm-project/vllm/issues/6200"""
    missing = "  ModuleNotFoundError: No module named 'torch'\n"
    assert "GD110" in {f.rule for f in pasted(missing).findings}
    built = pasted('    File "/tmp/pip-build-env-fqjbnf17/overlay/lib/python3.12/site-packages/'
                   'setuptools/build_meta.py", '
                   'line 313, in run_setup\n      exec(code, locals())\n' + missing)
    rules = {f.rule for f in built.findings}
    assert "GD301" in rules and "GD110" not in rules


def test_a_wrapped_message_states_both_versions_and_the_rule_judges_them():
    """cpp_extension's mismatch wraps before 'PyTorch (12.4)': both versions reach GD102, an extension build is in
    view, so the major mismatch is an error."""
    report = pasted("RuntimeError:\n      The detected CUDA version (11.8) mismatches the version that was used to "
                    "compile\n      PyTorch (12.4). Please make sure to use the same CUDA versions.\n")
    assert (report.facts["nvcc"]["version"], report.facts["torch"]["cuda"]) == ("11.8", "12.4")
    found = [f for f in report.findings if f.rule == "GD102"]
    assert found and found[0].severity == Severity.ERROR and "major 11 vs 12" in found[0].message


def test_a_minor_mismatch_is_information_only():
    report = pasted("UserWarning: The detected CUDA version (12.1) has a minor version mismatch with the version that "
                    "was used to compile PyTorch (12.4). Most likely this shouldn't be a problem.\n")
    assert [(f.rule, f.severity) for f in report.findings] == [("GD102", Severity.INFO)]


def test_a_message_a_reader_explains_still_states_its_fact():
    """torch's 'driver too old (found version 11000)' is read as an event by the log reader and states the
    driver's CUDA, 11.0."""
    report = pasted("UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version "
                    "11000). Please update your GPU driver.\n")
    assert report.facts["nvml"]["cuda_driver_version"] == "11.0"
    assert "GD101" in {f.rule for f in report.findings}


def test_two_messages_that_disagree_leave_the_fact_unknown():
    """Two builds name different torch CUDA versions: neither is taken, the disagreement is reported, and the rule
    still fires from the messages themselves."""
    report = pasted("The detected CUDA version (11.8) mismatches the version that was used to compile PyTorch (12.4).\n"
                    "The detected CUDA version (11.8) mismatches the version that was used to compile "
                    "PyTorch (12.1).\n")
    assert "cuda" not in report.facts.get("torch", {})
    assert any(c["fact"] == "torch.cuda" for c in report.conflicts)
    assert "GD102" in {f.rule for f in report.findings}


def collect_env(gpu: str) -> str:
    return COLLECT_ENV.replace("NVIDIA GeForce RTX 5060 Ti", gpu)


COLLECT_ENV = """PyTorch version: 2.6.0+cu126
Is debug build: False
CUDA used to build PyTorch: 12.6
ROCM used to build PyTorch: N/A
OS: Ubuntu 22.04.4 LTS (x86_64)
Python version: 3.11.9 (main, Apr  6 2024, 17:59:24) [GCC 11.4.0] (64-bit runtime)
Is CUDA available: True
CUDA runtime version: 12.6.77
GPU models and configuration: GPU 0: NVIDIA GeForce RTX 5060 Ti
Nvidia driver version: 570.124.06
"""


def test_the_capability_warning_gives_the_gpu_and_arch_list_to_the_arch_rule():
    """A GPU gpudoctor's table does not know: the warning's sm_120 and arch list let GD104 judge it as it judges
    torch.cuda.get_arch_list(), with the GPU named by the report."""
    warning = ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:235: UserWarning: NVIDIA GeForce RTX 5060 Ti "
               "with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
               "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n")
    report = pasted(warning + COLLECT_ENV)
    assert report.facts["nvml"]["gpus"][0]["cc"] == "12.0"
    found = [f for f in report.findings if f.rule == "GD104"]
    assert found and "NVIDIA GeForce RTX 5060 Ti is sm_120, but torch 2.6.0+cu126 ships kernels for" in found[0].message
    assert "line 1" in report.evidence["nvml.gpus[0].cc"]


def test_vllm_bf16_error_gives_the_gpu_its_compute_capability():
    report = pasted("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your "
                    "Tesla T4 GPU has compute capability 7.5.\n" + collect_env("Tesla T4"))
    assert report.facts["nvml"]["gpus"][0]["cc"] == "7.5"
    assert "GD201" in {f.rule for f in report.findings}


def test_a_compute_capability_two_messages_disagree_on_is_not_given():
    report = pasted("NVIDIA GeForce RTX 5060 Ti with CUDA capability sm_120 is not compatible with the current "
                    "PyTorch installation.\nFound GPU0 NVIDIA GeForce RTX 5060 Ti which is of cuda capability 3.5.\n"
                    "PyTorch no longer supports this GPU because it is too old.\n"
                    + COLLECT_ENV)
    assert "cc" not in report.facts["nvml"]["gpus"][0]


def test_other_processes_named_by_the_oom_message_are_gpu_occupants():
    """torch lists the other processes on the GPU beside its own line; in a container (no line for itself) a
    listed process may be the job itself, so none is counted."""
    others = pasted("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 25.96 GiB. GPU 4 has a total "
                    "capacity of 79.18 GiB of which 23.04 GiB is free. Process 7478 has 4.08 GiB memory in use. "
                    "Including non-PyTorch memory, this process has 52.02 GiB memory in use.\n")
    assert {"GD502", "GD508"} <= {f.rule for f in others.findings}
    assert "pid 7478 4.08 GiB" in next(f.message for f in others.findings if f.rule == "GD502")
    alone = pasted("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total "
                   "capacty of 14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Of "
                   "the allocated memory 14.06 GiB is allocated by PyTorch.\n")
    assert "GD502" not in {f.rule for f in alone.findings}


def test_a_minor_mismatch_never_hides_a_build_that_was_refused():
    """torch's 'most likely not a problem' states both versions; DeepSpeed's refusal in the same log is the error."""
    report = pasted("UserWarning: The detected CUDA version (13.1) has a minor version mismatch with the version that "
                    "was used to compile PyTorch (13.0). Most likely this shouldn't be a problem.\n"
                    "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA "
                    "version 13.1 does not match the version torch was compiled with 13.0, unable to compile cuda/cpp "
                    "extensions without a matching cuda version.\n")
    assert [(f.rule, f.severity) for f in report.findings if f.rule == "GD102"] == [("GD102", Severity.ERROR)]


def test_torch_range_warning_is_judged_by_the_range_it_states():
    """'Minimum and Maximum cuda capability … is (7.0) - (12.0)': 6.1 has no kernels (error), GB10's 12.1 runs the
    12.0 ones (information), and without the range on the line the warning cannot say (warning)."""
    def gd104(text):
        return [f.severity for f in pasted(text).findings if f.rule == "GD104"]
    line = ("Found GPU0 {} which is of cuda capability {}. Minimum and Maximum cuda capability supported by this "
            "version of PyTorch is (7.0) - (12.0)\n")
    assert gd104(line.format("NVIDIA GeForce MX350", "6.1")) == [Severity.ERROR]
    assert gd104(line.format("NVIDIA GB10", "12.1")) == [Severity.INFO]
    assert gd104("Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n    Minimum and Maximum cuda capability "
                 "supported by this version of PyTorch is\n    (8.0) - (12.0)\n") == [Severity.WARNING]


def test_memory_neither_free_nor_reserved_by_pytorch_is_held_by_others():
    """torch 1.x's sizes: 11.17 GiB total, 12.50 MiB free, 530 MiB reserved — some 10.6 GiB held outside PyTorch;
    a few hundred MiB outside (a CUDA context) is no occupant."""
    held = pasted("RuntimeError: CUDA out of memory. Tried to allocate 60.00 MiB (GPU 0; 11.17 GiB total capacity; "
                  "505.96 MiB already allocated; 12.50 MiB free; 530.00 MiB reserved in total by PyTorch)\n")
    assert "GD502" in {f.rule for f in held.findings}
    own = pasted("RuntimeError: CUDA out of memory. Tried to allocate 16.00 MiB (GPU 0; 3.94 GiB total capacity; "
                 "2.98 GiB already allocated; 14.25 MiB free; 3.00 GiB reserved in total by PyTorch)\n")
    assert "GD502" not in {f.rule for f in own.findings}


MOVED = [  # lines the log reader's code used to read, now atlas data: the same event kind, fields and rule
    ('I get "CUDA error: no kernel image is available" on our new box.', "no_kernel_image", {}, "GD104"),
    ("NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
     "no_kernel_image", {"gpu": "NVIDIA GeForce RTX 5090", "sm": "sm_120"}, "GD104"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ecc_uncorrectable", {}, "GD507"),
    ("Exception: >- DeepSpeed Op Builder: Installed CUDA version 12.0 does not match the version torch was compiled "
     "with 11.8, unable to compile cuda/cpp extensions without a matching cuda version.", "cuda_mismatch",
     {"nvcc": "12.0", "torch_cuda": "11.8"}, "GD102"),
    ("RuntimeError: Ninja is required to load C++ extensions", "ninja_missing", {}, "GD302"),
    ("deepspeed.ops.op_builder.builder.MissingCUDAException: CUDA_HOME does not exist, unable to compile CUDA op(s)",
     "cuda_home_missing", {}, "GD301"),
    ("AssertionError: CUDA_HOME does not exist, unable to compile CUDA op(s)", "cuda_home_missing", {}, "GD301"),
]


@pytest.mark.parametrize("line,kind,fields,rule", MOVED, ids=[row[1] for row in MOVED])
def test_messages_moved_from_code_to_the_atlas_keep_their_events(line, kind, fields, rule):
    snapshot = snapshot_from_reports(["-"], stdin=io.BytesIO((line + "\n").encode()))
    (event,) = [e for e in snapshot.facts["logs"]["events"] if e["kind"] == kind]
    assert {key: event.get(key) for key in fields} == fields and event["rule"] == rule
    assert rule in {f.rule for f in evaluate(snapshot).findings}
