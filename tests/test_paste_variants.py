"""Variants users paste that the message's own wording does not show: a message retyped in lower case, a message
quoted without its exception name, NCCL 2.2-2.3 lines without the word NCCL."""

import pytest

from gpudoctor.api import evaluate
from gpudoctor.ingest.source import snapshot_from_reports


def _fired(tmp_path, text):
    path = tmp_path / "paste.txt"
    path.write_text(text)
    return {f.rule for f in evaluate(snapshot_from_reports([str(path)])).findings}


@pytest.mark.parametrize("text", [
    "valueerror: bfloat16 is only supported on gpus with compute capability of at least 8.0. your tesla t4 gpu has "
    "compute capability 7.5.\n",
    "`bf16 mixed precision requires PyTorch >= 1.10 and a supported device.`\n",
    "    bf16 is only supported on A100+ GPUs\n",
], ids=["lower-case", "quoted-bare", "xformers"])
def test_bf16_refusals_as_pasted_are_gd201(tmp_path, text):
    assert "GD201" in _fired(tmp_path, text)


def test_a_lower_case_line_that_is_no_message_fires_nothing(tmp_path):
    assert _fired(tmp_path, "the error went away once i set bf16 to false in the config\n") == set()


def test_nccl_2_2_warn_without_the_word_nccl_is_read(tmp_path):
    text = ("NCCL version 2.2.13+cuda9.0\n"
            "gpu-a:18553:18611 [0] include/socket.h:360 WARN Call to connect failed : Connection timed out\n")
    assert "GD425" in _fired(tmp_path, text)


def test_a_warn_line_of_another_program_is_not_nccl(tmp_path):
    assert _fired(tmp_path, "2024-01-01 10:00:00 WARN Call to connect failed : Connection timed out\n") == set()
