"""Bad input for the report parsers: random text and bytes, mutated and truncated real reports, pathological
inputs for regular expressions, a 50 MB line and 16 MB texts (linear time). Never an exception other than
ReportError; always fast."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudoctor.ingest.report as ingest
from gpudoctor.ingest import nvcc
from gpudoctor.ingest.registry import BY_KIND
from gpudoctor.ingest.report import ParsedReport, ReportError, merge_reports, parse_report

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "reports"
CORPUS = ROOT.parent / "shared" / "corpus"


UNREADABLE = {"not_a_report.txt", "nvidia_smi_xml_entity_bomb.xml"}


def _samples(readable_only=False):
    paths = sorted(p for p in FIXTURES.iterdir() if p.is_file())
    if CORPUS.is_dir():
        for d in (CORPUS, CORPUS / "formats"):
            paths += sorted(p for p in d.iterdir() if p.is_file() and p.suffix in (".txt", ".xml"))
    return [p.read_text(encoding="utf-8") for p in paths if not (readable_only and p.name in UNREADABLE)]


SAMPLES = _samples()
READABLE = _samples(readable_only=True)
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


pytestmark = pytest.mark.usefixtures("parser_bugs_fail")


def parse_or_error(text, limit=5.0):
    start = time.process_time()  # CPU time: other processes on a loaded machine do not count
    try:
        report = parse_report(text, "fuzz.txt")
    except ReportError:
        report = None
    elapsed = time.process_time() - start
    assert elapsed < limit, "parse took %.2fs" % elapsed
    if report is not None:
        _check_shape(report)
    return report


def _check_shape(report: ParsedReport):
    assert report.kind in BY_KIND or report.kind == "mixed"
    assert isinstance(report.facts, dict) and report.facts
    json.dumps(report.facts)  # snapshot facts must be JSON
    json.dumps(report.evidence)
    assert set(report.facts) <= {"host", "nvml", "nvcc", "torch", "env"}
    for gpu in report.facts.get("nvml", {}).get("gpus", []):
        assert isinstance(gpu["name"], str) and gpu["name"]
        for key, value in gpu.items():
            if key.endswith("_bytes"):
                assert isinstance(value, int) and value >= 0
    for path in report.missing:
        assert path in ingest.NOTABLE_FACTS


# an alphabet that hits the parsers' special characters often
SPECIAL = st.sampled_from(list("|+-=.:[]()<>/\\ \t\n\r\x1b#>$%'\"0123456789") +
                          ["\uff1a", "\u2019", "\u00a0", "MiB", "GPU", "On", "N/A", "[OKAY]", "[NO]", "[YES]",
                           "Driver Version:", "CUDA Version:", "NVIDIA-SMI", "PyTorch version:", "Name: torch",
                           "Version: ", "release 12.1,", "<nvidia_smi_log>", "</gpu>", "<gpu>", "Processes:",
                           "torch version ....", "No CUDA", "Could not collect", "found version 11040",
                           "GPU 0: ", " : ", "MIG devices:", "#033[92m"])


@FUZZ
@given(st.text(max_size=3000))
def test_random_text(text):
    parse_or_error(text)


@FUZZ
@given(st.lists(SPECIAL, max_size=400).map("".join))
def test_random_tokens(text):
    parse_or_error(text)


@FUZZ
@given(st.binary(max_size=4000))
def test_random_bytes(data):
    parse_or_error(data)
    parse_or_error(data.decode("latin-1"))
    parse_or_error(data.decode("utf-8", errors="replace"))


@FUZZ
@given(st.sampled_from(SAMPLES), st.floats(min_value=0.0, max_value=1.0))
def test_truncated_reports(text, frac):
    cut = text[: int(len(text) * frac)]
    parse_or_error(cut)


@FUZZ
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_reports(text, data):
    chars = list(text)
    for _ in range(data.draw(st.integers(min_value=1, max_value=25))):
        if not chars:
            break
        i = data.draw(st.integers(min_value=0, max_value=len(chars) - 1))
        op = data.draw(st.sampled_from(["delete", "replace", "insert", "dup_line"]))
        if op == "delete":
            del chars[i]
        elif op == "replace":
            chars[i] = data.draw(SPECIAL)
        elif op == "insert":
            chars.insert(i, data.draw(SPECIAL))
        else:
            j = text.find("\n", i)
            chars.insert(i, text[i:j if j > 0 else len(text)])
    parse_or_error("".join(chars))


@FUZZ
@given(st.lists(st.sampled_from(READABLE), min_size=2, max_size=4), st.sampled_from(["\n", "\n\n", "\r\n"]))
def test_concatenated_reports(texts, sep):
    report = parse_or_error(sep.join(texts))
    assert report is not None


@FUZZ
@given(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=5))
def test_merge_never_raises(texts):
    reports = [r for r in (parse_or_error(t) for t in texts) if r is not None]
    facts, evidence, conflicts = merge_reports(reports)
    json.dumps(facts)
    for c in conflicts:
        assert set(c) == {"fact", "values", "sources"} and len(c["values"]) == len(c["sources"]) >= 2


@pytest.mark.parametrize("text", [
    "|" * 200_000,
    "+" + "-" * 200_000,
    "| " + "GPU Name " * 20_000 + "\n|====|\n" + "|   0  X  On  | 0:0 |  0 |\n" * 2000,
    ("a" * 5000 + " ") * 100,
    "." * 200_000 + "[YES]",
    "torch version " + "." * 100_000,
    "ninja" + " ." * 100_000,
    "GPU 0: " + "x" * 100_000 + "(UUID: GPU-",
    "found version " * 50_000,
    "\n" * 500_000,
    " \n" * 300_000,
    "> " * 100_000,
    "#033[" * 100_000,
    "\x1b[" * 100_000 + "1",
    "[1;" * 100_000,
    "$ " * 100_000,
    "Name: torch\n" * 50_000,
    "    Product Name : X\n" * 50_000,
    "GPU 00000000:01:00.0\n" + "    " * 20_000 + "deep : 1\n",
    "".join("%s%s\n" % ("    " * (i % 200), "k : v") for i in range(50_000)),
    "<nvidia_smi_log>" + "<gpu>" * 50_000,
    "<nvidia_smi_log>" + "<a>" * 200_000,
    "couldn" + "'" * 100_000,
    "Failed to initialize NVML: " * 20_000,
], ids=lambda t: "%r...%d" % (t[:12], len(t)))
def test_pathological_inputs_are_fast(text):
    parse_or_error(text, limit=5.0)


def _big_text(target: int) -> str:
    parts = [t for t in SAMPLES]
    blob = "\n".join(parts) + "\nsome prose between the pastes, with a | pipe and : colons\n"
    return blob * (target // len(blob) + 1)


def test_a_big_text_in_linear_time():
    """4 MB take about 8 times the CPU time of 512 KB (a quadratic pass: 64 times); at that rate a 50 MB paste
    takes seconds."""
    text = _big_text(4 * 1024 * 1024)
    assert len(text) >= 4 * 1024 * 1024
    start = time.process_time()
    report = parse_report(text, "big.txt")
    elapsed = time.process_time() - start
    assert report.kind == "mixed"
    assert report.facts["nvml"]["driver_version"]
    assert elapsed < 5, "4 MB took %.1fs" % elapsed
    small = text[: len(text) // 8]
    start = time.process_time()
    parse_report(small, "small.txt")
    small_elapsed = time.process_time() - start
    assert elapsed < 20 * max(small_elapsed, 0.05), (elapsed, small_elapsed)


@pytest.mark.slow
def test_16_megabytes_of_noise():
    import random

    rng = random.Random(1234)
    alphabet = "abc |+-=.:[]()<>/\\\n\t0123456789GPU"
    chunk = "".join(rng.choice(alphabet) for _ in range(1 << 20))
    text = chunk * 16
    start = time.process_time()
    with pytest.raises(ReportError):
        parse_report(text, "noise.txt")
    assert time.process_time() - start < 20


@pytest.mark.slow
def test_single_50mb_line():
    start = time.perf_counter()
    with pytest.raises(ReportError):
        parse_report("x" * (50 * 1024 * 1024), "line.txt")
    assert time.perf_counter() - start < 30


def test_parser_bug_becomes_warning(monkeypatch):
    def boom(lines, name):
        raise RuntimeError("bug")

    monkeypatch.setattr(nvcc, "parse", boom)
    text = (FIXTURES / "nvcc_crlf.txt").read_text() + "\n" + (FIXTURES / "pip_show_torch_cpu.txt").read_text()
    report = parse_report(text, "t.txt")
    assert report.facts["torch"]["version"] == "2.1.2+cpu"
    assert report.warnings == ["t.txt: the nvcc part could not be parsed (RuntimeError: bug)"]
    with pytest.raises(ReportError, match="could not be parsed"):
        parse_report((FIXTURES / "nvcc_crlf.txt").read_text(), "t.txt")
