"""`bench compare A.json B.json`: two runs side by side with the ratio per size; `--plot FILE` draws busbw against
message size (matplotlib), read back here: the SVG parses with its axes, series and floor, the PNG is a PNG."""

import builtins
import json
import xml.etree.ElementTree as ET

import pytest
from conftest import FIXTURES, cli_in_process

RUN = FIXTURES / "outputs" / "bench-nccl-gloo-2ranks.json"  # a recorded gloo run, 8 B to 1 MiB
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def faster(tmp_path):
    """The same run 1.5x faster above 4 KiB, without its 8 B row, held to a 0.5 GB/s floor."""
    data = json.loads(RUN.read_text())
    data["rows"] = [dict(row, busbw_gbps=row["busbw_gbps"] * (1.5 if row["bytes"] > 4096 else 1))
                    for row in data["rows"] if row["bytes"] != 8]
    data["summary"] = dict(data["summary"], avg_busbw_gbps=data["summary"]["avg_busbw_gbps"] * 1.5,
                           min_busbw_gbps=0.5)
    path = tmp_path / "after.json"
    path.write_text(json.dumps(data))
    return path


def test_compare_shows_both_runs_and_the_ratio_per_size(faster):
    result = cli_in_process("bench", "compare", RUN, faster)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"A: {RUN} · gloo · 2 ranks on 1 node")
    rows = {line.split()[1] + " " + line.split()[2]: line.split()[3:] for line in lines[3:] if line.startswith("all_")}
    assert rows["8 B"][1:] == ["–", "–"]  # only in A
    assert rows["1 MiB"][2] == "1.50" and rows["1 KiB"][2] == "1.00"
    assert "B/A 1.50" in lines[-1]


@pytest.mark.parametrize("content,says", [("{}", "not a `gpudoctor bench nccl"), ("[1", "not JSON")])
def test_compare_refuses_what_is_not_a_bench_result(tmp_path, content, says):
    (tmp_path / "x.json").write_text(content)
    result = cli_in_process("bench", "compare", RUN, tmp_path / "x.json")
    assert result.returncode == 2 and says in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_svg_has_its_axes_series_and_floor(tmp_path, faster):
    plot = tmp_path / "fabric.svg"
    result = cli_in_process("bench", "compare", RUN, faster, "--plot", plot)
    assert result.returncode == 0, result.stderr
    root = ET.parse(plot).getroot()
    words = {"".join(node.itertext()).strip() for node in root.iter(f"{SVG}text")}
    assert {"message size", "bus bandwidth (GB/s)", "2 KiB", "512 KiB"} <= words
    assert any(word.startswith("A ") and word.endswith("bench-nccl-gloo-2ranks.json") for word in words)
    assert any(word.startswith("B ") and word.endswith("floor 0.5 GB/s") for word in words)
    series = [group for group in root.iter(f"{SVG}g") if group.get("id", "").startswith("series-")]
    assert len(series) == 2
    points = [len(group.find(f"{SVG}path").get("d").split("L")) for group in series]
    assert points == [18, 17]  # every size of each run


def test_a_png_and_a_wrong_suffix(tmp_path, faster):
    result = cli_in_process("bench", "compare", RUN, faster, "--plot", tmp_path / "fabric.png")
    assert result.returncode == 0, result.stderr
    head = (tmp_path / "fabric.png").read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(head[16:20], "big") == 800
    wrong = cli_in_process("bench", "compare", RUN, faster, "--plot", tmp_path / "fabric.gif")
    assert wrong.returncode == 2 and ".svg or .png" in wrong.stderr


def test_without_matplotlib_the_plot_is_one_line_and_exit_2(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = cli_in_process("bench", "compare", RUN, RUN, "--plot", tmp_path / "x.svg")
    assert result.returncode == 2 and "pip install matplotlib" in result.stderr


@pytest.mark.slow
def test_bench_nccl_draws_its_own_run(tmp_path):
    plot = tmp_path / "run.svg"
    result = cli_in_process("bench", "nccl", "-b", "1K", "-e", "8K", "-n", "2", "-w", "1", "--plot", plot)
    assert result.returncode == 0, result.stderr
    root = ET.parse(plot).getroot()
    series = [group for group in root.iter(f"{SVG}g") if group.get("id", "").startswith("series-")]
    assert len(series) == 1 and len(series[0].find(f"{SVG}path").get("d").split("L")) == 4
