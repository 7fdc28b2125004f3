"""The fleet: recorded machines changed the way real clusters drift, judged per node and across nodes (GD8xx);
`gpudoctor fleet` on files; a real `check --fleet` under torchrun and under a per-process env:// launch (gloo, CPU)."""

import copy
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, gpudoctor_cmd

from gpudoctor.catalog import load_catalog
from gpudoctor.fleet import evaluate_fleet
from gpudoctor.snapshot import from_json

H100 = json.loads((FIXTURES / "machines" / "h100x8-healthy.json").read_text())
CROSS = ("GD801", "GD802", "GD803", "GD804", "GD805")


def machine(host, change=None):
    data = copy.deepcopy(H100)
    data["facts"]["host"]["hostname"] = host
    if change:
        change(data["facts"])
    return data


def fleet_of(*docs):
    nodes = [(f"{d['facts']['host']['hostname']}:{8 * i}", from_json(d, f"n{i}.json")) for i, d in enumerate(docs)]
    return evaluate_fleet(nodes, load_catalog())


def cross(fleet):
    return [(f.rule, dict(f.evidence["nodes"])) for f in fleet.cross.findings]


def test_identical_nodes_give_no_cross_node_finding():
    fleet = fleet_of(machine("a"), machine("b"), machine("c"))
    assert cross(fleet) == []
    assert sorted(fleet.cross.passed) == list(CROSS)
    assert [name for name, _ in fleet.nodes] == ["a:0", "b:8", "c:16"]
    assert all(report.findings == () for _, report in fleet.nodes)


def test_one_node_on_another_driver():
    old = machine("c", lambda f: f["nvml"].update(driver_version="535.104.05"))
    assert cross(fleet_of(machine("a"), machine("b"), old)) == [
        ("GD801", {"550.90.07": ["a:0", "b:8"], "535.104.05": ["c:16"]})]


def test_one_node_with_another_torch_and_nccl():
    def newer(facts):
        facts["torch"].update(version="2.6.0+cu124", nccl="2.25.1")
        facts["torch"].get("cuda_wheels", {}).update(nccl="2.25.1")  # the NCCL it loads is its wheel's

    found = cross(fleet_of(machine("a"), machine("b", newer)))
    assert found == [("GD802", {"2.5.1+cu124": ["a:0"], "2.6.0+cu124": ["b:8"]}),
                     ("GD802", {"2.21.5": ["a:0"], "2.25.1": ["b:8"]})]


def test_differing_nccl_ib_hca_but_not_cuda_visible_devices():
    def rank(hca, visible):
        return lambda f: f["env"].update(NCCL_IB_HCA=hca, CUDA_VISIBLE_DEVICES=visible)

    fleet = fleet_of(machine("a", rank("mlx5", "0")), machine("b", rank("mlx5", "1")),
                     machine("c", rank("mlx5_0:1", "2")))
    assert cross(fleet) == [("GD803", {"mlx5": ["a:0", "b:8"], "mlx5_0:1": ["c:16"]})]
    assert fleet.cross.findings[0].evidence["variable"] == "NCCL_IB_HCA"


def test_a_variable_set_on_one_node_only():
    fleet = fleet_of(machine("a"), machine("b", lambda f: f["env"].update(FI_PROVIDER="efa")))
    assert cross(fleet) == [("GD803", {"(unset)": ["a:0"], "efa": ["b:8"]})]


def test_seven_gpus_against_eight():
    seven = machine("b", lambda f: f["nvml"].update(gpus=f["nvml"]["gpus"][:7]))
    assert cross(fleet_of(machine("a"), seven, machine("c"))) == [
        ("GD804", {"8 × NVIDIA H100 80GB HBM3": ["a:0", "c:16"], "7 × NVIDIA H100 80GB HBM3": ["b:8"]})]


def test_small_shm_on_one_node_is_the_odd_one_out():
    small = machine("b", lambda f: f["host"].update(shm_bytes=64 * 1024**2))
    fleet = fleet_of(machine("a"), small, machine("c"))
    assert cross(fleet) == [("GD805", {"fails": ["b:8"], "passes": ["a:0", "c:16"]})]
    assert [f.rule for f in dict(fleet.nodes)["b:8"].findings] == ["GD503"]
    assert str(fleet.cross.findings[0].severity) == "warning"


def test_a_rule_failing_everywhere_is_not_odd():
    def small(f):
        f["host"].update(shm_bytes=64 * 1024**2)
    fleet = fleet_of(machine("a", small), machine("b", small))
    assert cross(fleet) == []
    assert all([f.rule for f in report.findings] == ["GD503"] for _, report in fleet.nodes)


def test_unknown_facts_are_listed_apart_never_guessed():
    blind = machine("b")
    del blind["facts"]["nvml"]
    fleet = fleet_of(machine("a"), blind, machine("c", lambda f: f["nvml"].update(driver_version="535.104.05")))
    driver = [f for f in fleet.cross.findings if f.rule == "GD801"][0]
    assert driver.evidence["nodes"] == {"550.90.07": ["a:0"], "535.104.05": ["c:16"]}
    assert driver.evidence["unknown"] == ["b:8"]


def write(tmp_path, *docs):
    paths = []
    for i, doc in enumerate(docs):
        path = tmp_path / f"node{i}.json"
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


def test_fleet_command_json_schema(tmp_path, run_cli):
    paths = write(tmp_path, machine("dgx-01"), machine("dgx-02"),
                  machine("dgx-03", lambda f: f["env"].update(NCCL_IB_HCA="mlx5_0:1")))
    code, out, err = run_cli("fleet", *paths, "--format", "json")
    assert code == 1 and err == ""
    doc = json.loads(out)
    assert doc["schema"] == "gpudoctor.fleet/1" and doc["tool"]["name"] == "gpudoctor"
    assert [node["node"] for node in doc["nodes"]] == ["dgx-01", "dgx-02", "dgx-03"]
    for node in doc["nodes"]:
        assert set(node["summary"]) == {"error", "warning", "info", "passed", "unknown", "not_applicable"}
        assert node["findings"] == []
        # a node's own report has no fleet to compare and no DeepSpeed config: not applicable, never passed
        idle = {item["rule"]: item["reason"] for item in node["not_applicable"]}
        assert idle["GD304"] == "no DeepSpeed config" and "GD801" not in idle
        assert len(idle) == node["summary"]["not_applicable"]
    [finding] = doc["findings"]
    assert finding["rule"] == "GD803" and finding["name"] == "fleet-env-mismatch"
    assert finding["severity"] == "error" and "NCCL_IB_HCA" in finding["message"]
    assert finding["nodes"] == {"mlx5": ["dgx-01", "dgx-02"], "mlx5_0:1": ["dgx-03"]}
    assert finding["fix"]["summary"]
    assert doc["summary"]["error"] == 1 and doc["summary"]["passed"] == 4


def test_fleet_command_text_and_exit_codes(tmp_path, run_cli):
    paths = write(tmp_path, machine("dgx-01"), machine("dgx-01", lambda f: f["host"].update(shm_bytes=2**26)))
    code, out, _ = run_cli("fleet", *paths, "--format", "plain")
    assert code == 1  # GD503 is an error on node1; GD805 a warning
    lines = out.splitlines()
    assert lines[0].startswith("gpudoctor ") and "fleet of 2 nodes" in lines[0]
    assert lines[2].startswith(" ✓ node0.json  0 errors")  # same hostname: named by file
    assert lines[3].startswith(" ✗ node1.json  1 error") and lines[3].endswith("GD503")
    assert any("GD805 fleet-odd-one-out" in line for line in lines)
    assert run_cli("fleet", *paths, "--ignore", "GD503")[0] == 0
    assert run_cli("fleet", *paths, "--select", "GD805", "--format", "json")[0] == 0  # GD503 not selected
    code, _, _ = run_cli("fleet", *paths, "--fail-on", "never")
    assert code == 0


def test_a_fleet_where_no_rule_had_anything_to_judge_is_never_green(tmp_path, run_cli):
    paths = write(tmp_path, machine("dgx-01"), machine("dgx-02"))
    code, out, _ = run_cli("fleet", *paths, "--select", "GD304,GD805", "--format", "plain")  # no DeepSpeed config
    lines = out.splitlines()
    assert code == 0 and lines[2].startswith(" ? dgx-01  0 errors · 0 warnings · 0 info · 0 passed · 0 unknown")
    assert lines[4].strip() == "not applicable: 1 rule on every node (no DeepSpeed config)"
    code, out, _ = run_cli("fleet", paths[0], "--select", "GD304,GD8", "--format", "plain")
    assert code == 0 and "✓" not in out and "5 not applicable" in out  # one node: nothing to compare


@pytest.mark.parametrize("content,why", [
    ("not json at all", "not JSON"),
    (json.dumps({"schema": "gpudoctor.report/1", "findings": []}), "wrong schema"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, run_cli, content, why):
    good = write(tmp_path, machine("a"))[0]
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = run_cli("fleet", good, bad)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and why in err and "bad.json" in err
    code, _, err = run_cli("fleet", good, tmp_path / "missing.json")
    assert code == 2 and "no such file" in err


def test_check_fleet_outside_a_launcher_says_what_is_needed(monkeypatch, run_cli):
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    code, out, err = run_cli("check", "--fleet")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "torchrun" in err and "srun" in err


def test_check_fleet_without_torch_says_what_is_needed(tmp_path):
    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('no module named torch._C')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}", RANK="0", WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT="29999")
    done = subprocess.run(gpudoctor_cmd() + ["check", "--fleet"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "needs torch" in done.stderr


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "SLURM_", "TORCHELASTIC_"))}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


@pytest.mark.slow
def test_real_torchrun_gathers_both_ranks_on_rank_0(tmp_path):
    """Two real ranks under torchrun on CPU: rank 0 prints one fleet document naming both; the env is the same."""
    pytest.importorskip("torch.distributed")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               "-m", "gpudoctor", "check", "--fleet", "--format", "json", "--quick"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=_clean_env(), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout)  # exactly one JSON document: rank 1 printed nothing
    host = socket.gethostname()
    assert doc["schema"] == "gpudoctor.fleet/1"
    assert [node["node"] for node in doc["nodes"]] == [f"{host}:0", f"{host}:1"]
    # --quick reads torch's version without importing it: cuDNN (and NCCL without its wheel) stay unknown on
    # both ranks, so GD802 is unknown, never a pass
    assert doc["findings"] == [] and doc["summary"]["passed"] == len(CROSS) - 1 and doc["summary"]["unknown"] == 1


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_real_ranks_with_different_nccl_settings(tmp_path):
    """Two processes started as srun would (each its own env, env:// rendezvous): NCCL_IB_HCA differs -> GD803,
    reported once by rank 0; rank 1 prints nothing and exits with rank 0's verdict."""
    pytest.importorskip("torch.distributed")
    port = str(_free_port())
    procs = []
    for rank, hca in ((0, "mlx5"), (1, "mlx5_0:1")):
        env = _clean_env(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                         MASTER_PORT=port, NCCL_IB_HCA=hca)
        procs.append(subprocess.Popen(gpudoctor_cmd() + ["check", "--fleet", "--format", "json", "--quick"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                      cwd=tmp_path))
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [1, 1], outs[0][1][-2000:] + outs[1][1][-2000:]
    assert outs[1][0] == ""
    doc = json.loads(outs[0][0])
    host = socket.gethostname()
    assert [(f["rule"], f["nodes"]) for f in doc["findings"]] == [
        ("GD803", {"mlx5": [f"{host}:0"], "mlx5_0:1": [f"{host}:1"]})]


def test_text_shows_a_finding_every_node_has_once(tmp_path, run_cli):
    def small(f):
        f["host"].update(shm_bytes=2**26)
    paths = write(tmp_path, machine("a", small), machine("b", small))
    code, out, _ = run_cli("fleet", *paths, "--format", "plain")
    assert code == 1
    assert out.count("GD503 shm-too-small") == 1 and " On every node" in out and " On a" not in out
    assert "Across nodes" not in out


# --- honest cross-node verdicts ------------------------------------------------------------------------------

def _driver(version):
    return lambda f: f["nvml"].update(driver_version=version)


def test_a_driver_tie_claims_no_majority_and_names_the_newer():
    fleet = fleet_of(machine("a", _driver("535.104.05")), machine("b", _driver("550.90.07")))
    driver = [f for f in fleet.cross.findings if f.rule == "GD801"][0]
    assert "most have" not in driver.fix.summary
    assert "the newest here is 550.90.07 (on 1 of 2 nodes)" in driver.fix.summary


def test_the_older_driver_is_never_recommended_even_on_most_nodes():
    fleet = fleet_of(machine("a", _driver("535.104.05")), machine("b", _driver("535.104.05")),
                     machine("c", _driver("550.90.07")))
    driver = [f for f in fleet.cross.findings if f.rule == "GD801"][0]
    assert "550.90.07" in driver.fix.summary and "535" not in driver.fix.summary


def test_a_node_without_torch_facts_makes_gd802_unknown_not_passed():
    def broken(f):
        f["torch"] = {"status": "broken", "error": "ImportError: libcudnn.so.9"}

    fleet = fleet_of(machine("a"), machine("b", broken))
    assert "GD802" not in fleet.cross.passed
    assert [u.rule for u in fleet.cross.unknown] == ["GD802"]
    fleet = fleet_of(machine("a"), machine("b", lambda f: f.pop("torch")))
    assert [u.rule for u in fleet.cross.unknown] == ["GD802"]
    # a difference among the nodes that were probed stands
    newer = machine("c", lambda f: f["torch"].update(version="2.6.0+cu124"))
    fleet = fleet_of(machine("a"), machine("b", broken), newer)
    assert [f.rule for f in fleet.cross.findings if f.rule == "GD802"] == ["GD802"]
    assert "GD802" not in [u.rule for u in fleet.cross.unknown]
    assert "GD802" in fleet_of(machine("a"), machine("b")).cross.passed


def test_logging_variables_that_differ_are_info_not_a_hang():
    def debug(value):
        return lambda f: f["env"].update(NCCL_DEBUG=value, TORCH_CPP_LOG_LEVEL=value)

    fleet = fleet_of(machine("a", debug("INFO")), machine("b", debug("WARN")))
    found = [(f.rule, f.evidence["variable"], str(f.severity)) for f in fleet.cross.findings]
    assert found == [("GD803", "NCCL_DEBUG", "info"), ("GD803", "TORCH_CPP_LOG_LEVEL", "info")]
    assert "hang at" not in fleet.cross.findings[0].message
    fleet = fleet_of(machine("a", lambda f: f["env"].update(NCCL_ALGO="Ring")), machine("b"))
    assert [str(f.severity) for f in fleet.cross.findings if f.rule == "GD803"] == ["error"]


# --- check --fleet: the gloo interface, JSON between ranks ------------------------------------------------------

INTERFACES = [{"name": "lo", "up": True, "addresses": ["127.0.0.1", "::1"]},
              {"name": "a-lo-first", "up": True, "addresses": []},
              {"name": "docker0", "up": True, "addresses": ["172.17.0.1"]},
              {"name": "eth0", "up": False, "addresses": ["10.0.0.5"]},
              {"name": "eth1", "up": True, "addresses": ["10.1.0.5"]},
              {"name": "ib0", "up": True, "addresses": ["fe80::1"]},
              {"name": "ib1", "up": True, "addresses": ["192.168.10.5"]}]


@pytest.mark.parametrize("value, chosen", [
    ("eth", "eth1"),  # a prefix: eth0 is down
    ("=eth1", "eth1"),  # an exact name
    ("=eth", None),  # exact: no interface is called "eth"
    ("ib", "ib1"),  # ib0 has no IPv4 address
    ("^docker,lo,eth", "ib1"),  # everything but these prefixes
    ("^=eth1,ib1,docker0", "lo"),  # everything but these names: loopback is all that is left
    ("^=eth1", "docker0"),  # loopback comes last
    ("wlan", None),
    ("^", None),  # NCCL ignores a value this short
])
def test_nccl_socket_ifname_syntax_resolves_to_one_interface(value, chosen):
    from gpudoctor.fleet import gloo_interface

    assert gloo_interface({"NCCL_SOCKET_IFNAME": value}, INTERFACES) == chosen


def test_gloo_socket_ifname_wins_and_a_failed_rendezvous_names_the_interface(monkeypatch):
    from gpudoctor.fleet import gloo_interface
    from gpudoctor.rendezvous import Group, Rank

    assert gloo_interface({"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "eth0"}, INTERFACES) is None
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth")
    monkeypatch.setenv("MASTER_ADDR", "10.1.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    group = Group(Rank(3, 4, 3, "env://", "torchrun"), "check --fleet", 60, interface="eth1")
    line = str(group.failure("reach the others", RuntimeError("Connection refused\nmore")))
    assert line == ("check --fleet: rank 3 could not reach the others within 60 s (RuntimeError: Connection "
                    "refused); MASTER_ADDR=10.1.0.1 MASTER_PORT=29500 over interface eth1 (GLOO_SOCKET_IFNAME, from "
                    "NCCL_SOCKET_IFNAME=eth)")


def test_check_fleet_gives_gloo_the_interface_and_names_it_when_the_rendezvous_fails(monkeypatch, run_cli):
    pytest.importorskip("torch.distributed")
    from gpudoctor.rendezvous import Group

    seen = []

    def unreachable(group):
        seen.append(os.environ.get("GLOO_SOCKET_IFNAME"))
        raise group.failure("reach the others", RuntimeError("Connection refused"))

    monkeypatch.setattr(Group, "join", unreachable)
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    for name, value in dict(RANK="1", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29999",
                            NCCL_SOCKET_IFNAME="=lo").items():
        monkeypatch.setenv(name, value)
    code, out, err = run_cli("check", "--fleet", "--quick", "--select", "GD8")
    assert seen == ["lo"] and code == 2 and out == ""
    assert err.strip().endswith("over interface lo (GLOO_SOCKET_IFNAME, from NCCL_SOCKET_IFNAME==lo)"), err


def test_no_pickle_crosses_ranks():
    """torch's *_object collectives unpickle what other ranks send: gpudoctor uses JSON bytes instead."""
    import re

    for path in (ROOT / "gpudoctor").rglob("*.py"):
        assert not re.search(r"\b(all_gather_object|gather_object|broadcast_object_list|scatter_object_list)\(",
                             path.read_text()), path


@pytest.mark.slow
@pytest.mark.parametrize("signum,code,line", [("SIGINT", 130, "gpudoctor: interrupted"),
                                              ("SIGTERM", 143, "gpudoctor: terminated")])
def test_a_signal_while_rank_0_waits_for_its_peers_ends_it_quietly(signum, code, line):
    """Rank 0 of two, its peer never comes: SIGINT (Ctrl-C) or SIGTERM ends the wait at once, one line, no
    traceback, no c10d lines (the rendezvous waits in a helper thread; the main thread takes the signal)."""
    pytest.importorskip("torch")
    import signal
    import time

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=str(ROOT), RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    proc = subprocess.Popen(gpudoctor_cmd() + ["check", "--fleet", "--quick", "--timeout", "60"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # waiting for its peer: its store listens on MASTER_PORT
            with socket.socket() as client:
                if client.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("rank 0 never started its store")
        proc.send_signal(getattr(signal, signum))
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert (proc.returncode, err, out) == (code, line + "\n", "")


# ---- many nodes: identical nodes judged once, the document written as json.dumps writes it ----------------------

def fleet_report(paths, fmt: str) -> str:
    """`gpudoctor fleet PATHS --format FMT` as written, without the seconds it took."""
    import io

    from gpudoctor.fleet import fleet_nodes, read_fleet
    from gpudoctor.render.fleet import render

    paths = [str(path) for path in paths]
    out = io.StringIO()
    render(evaluate_fleet(fleet_nodes(read_fleet(paths), paths), load_catalog()), fmt, out)
    return out.getvalue()


@pytest.mark.parametrize("fmt,recorded", [("json", "fleet-dgx-unchanged.json"), ("plain", "fleet-dgx-unchanged.txt")])
def test_the_three_node_report_is_what_it_was(fmt, recorded):
    """The recorded 3-node fleet's report, byte for byte the document and the text it gave before nodes were judged
    by digest, rules' verdicts reused across nodes and the document written in pieces
    (fixtures/outputs/fleet-dgx-unchanged.*; regenerate them from `gpudoctor fleet fixtures/fleet/dgx-0?.json
    --format json|plain` when a rule changes on purpose, `seconds` as recorded)."""
    paths = [FIXTURES / "fleet" / f"dgx-0{n}.json" for n in (1, 2, 3)]
    expected = (FIXTURES / "outputs" / recorded).read_text()
    if fmt == "json":
        expected = expected.replace(f'"seconds": {json.loads(expected)["seconds"]}', '"seconds": 0.0')
    assert fleet_report(paths, fmt) == expected


def test_nodes_alike_but_for_their_name_are_judged_once(tmp_path, monkeypatch):
    import gpudoctor.fleet as fleet_module
    from gpudoctor.fleet import fleet_nodes, read_fleet

    judged = []
    real = fleet_module.evaluate
    monkeypatch.setattr(fleet_module, "evaluate",
                        lambda snapshot, rules, **memo: judged.append(1) or real(snapshot, rules, **memo))
    older = lambda facts: facts["nvml"].update(driver_version="535.54.03")  # noqa: E731
    docs = [machine(f"node{i}") for i in range(6)] + [machine("odd", older)]
    paths = [str(path) for path in write(tmp_path, *docs)]
    snapshots = read_fleet(paths)
    fleet = evaluate_fleet(fleet_nodes(snapshots, paths), load_catalog())
    assert len(judged) == 2 + 1  # two kinds of node, then the cross-node rules once
    assert [name for name, _ in fleet.nodes] == [f"node{i}" for i in range(6)] + ["odd"]
    assert [report.facts["host"]["hostname"] for _, report in fleet.nodes] == [name for name, _ in fleet.nodes]
    alone = evaluate_fleet([(doc["facts"]["host"]["hostname"], from_json(doc, f"n{i}.json"))
                            for i, doc in enumerate(docs)], load_catalog())
    assert [(r.findings, r.passed, r.unknown) for _, r in fleet.nodes] == \
           [(r.findings, r.passed, r.unknown) for _, r in alone.nodes]
    assert [(f.rule, f.message) for f in fleet.cross.findings] == [(f.rule, f.message) for f in alone.cross.findings]


def test_a_probe_or_an_origin_that_differs_is_another_kind_of_node(tmp_path):
    from gpudoctor.fleet import read_fleet

    failed = machine("b")
    failed["probes"] = [{"name": "nvml", "status": "timeout", "seconds": 10.0, "error": "timed out"}]
    snapshots = read_fleet([str(path) for path in write(tmp_path, machine("a"), failed, machine("c"))])
    digests = [snapshot.source["digest"] for snapshot in snapshots]
    assert digests[0] == digests[2] != digests[1]


def test_distinct_nodes_share_the_verdicts_they_have_alike(tmp_path, monkeypatch):
    """Nodes that all differ (each its own GPU UUIDs) are judged one by one, but a rule not applicable or unknown for
    the same reason is one value on every node: walked, redacted and JSON-encoded once per set of verdicts, however
    many nodes have it; the document written in pieces is still json.dumps's."""
    import gpudoctor.render.fleet as render_fleet
    from gpudoctor.fleet import fleet_nodes, read_fleet
    from gpudoctor.redact import redact_data

    def own_uuids(index):  # and no record of torch's nvidia-* wheels (GD111 unknown)
        return lambda facts: [facts["torch"].pop("cuda_wheels")] + [
            gpu.update(uuid=f"GPU-{index:08d}-{n:04d}") for n, gpu in enumerate(facts["nvml"]["gpus"])]

    docs = [machine(f"n{i}", own_uuids(i)) for i in range(4)]
    paths = [str(path) for path in write(tmp_path, *docs)]
    fleet = evaluate_fleet(fleet_nodes(read_fleet(paths), paths), load_catalog())
    first, *others = [report for _, report in fleet.nodes]
    assert first.not_applicable and first.unknown
    for report in others:
        assert report is not first and report.facts is not first.facts  # judged on its own
        assert [id(v) for v in report.not_applicable + report.unknown] == \
               [id(v) for v in first.not_applicable + first.unknown]
    shown = redact_data(render_fleet._as_shown(fleet))
    encoded = []
    real = render_fleet._dumps
    monkeypatch.setattr(render_fleet, "_dumps", lambda value: encoded.append(1) or real(value))
    assert "".join(render_fleet.json_chunks(shown)) == json.dumps(render_fleet.to_json(shown), indent=2,
                                                                   ensure_ascii=False)
    assert len(encoded) == 2  # the document around the nodes, then the verdicts all four nodes have


@pytest.mark.parametrize("host", ["plain", 'a "quoted"\\name', "ünïcode-節点", "esc\x1b[31mape\n"])
def test_the_document_in_pieces_is_json_dumps(tmp_path, host):
    """The writer of many nodes (render.fleet.json_chunks) against the library, byte for byte."""
    from gpudoctor.fleet import fleet_nodes, read_fleet
    from gpudoctor.redact import redact_data
    from gpudoctor.render.fleet import _as_shown, json_chunks, to_json

    docs = [machine(f"{host}{i}", (lambda f: f["env"].update(NCCL_IB_HCA="mlx5_0:1")) if i % 3 == 0 else None)
            for i in range(7)]
    paths = [str(path) for path in write(tmp_path, *docs)]
    fleet = redact_data(_as_shown(evaluate_fleet(fleet_nodes(read_fleet(paths), paths), load_catalog())))
    assert "".join(json_chunks(fleet)) == json.dumps(to_json(fleet), indent=2, ensure_ascii=False)


def test_a_group_another_node_holds_is_checked_once_a_nodes_own_still_is(tmp_path):
    """read_fleet checks a fact group against the schema once for all the nodes that hold it as it is, and still
    refuses a node's own malformed group with from_json's line, naming that node's file."""
    from gpudoctor.fleet import read_fleet
    from gpudoctor.snapshot import SnapshotError

    bad = machine("b", lambda facts: facts["nvml"]["gpus"][3].update(memory_total_bytes="80GB"))
    paths = [str(path) for path in write(tmp_path, machine("a"), bad)]
    with pytest.raises(SnapshotError) as refused:
        read_fleet(paths)
    with pytest.raises(SnapshotError) as alone:
        from_json(json.loads(Path(paths[1]).read_text()), paths[1])
    assert str(refused.value) == str(alone.value)
    assert "facts.nvml.gpus[3].memory_total_bytes is a string" in str(refused.value)
    snapshots = read_fleet([str(path) for path in write(tmp_path, machine("a"), machine("c"))])
    assert all(snapshots[0].facts[group] is snapshots[1].facts[group] for group in ("nvml", "torch", "env"))
    assert snapshots[1].facts["host"]["hostname"] == "c" and snapshots[0].facts["host"]["hostname"] == "a"


def test_the_cycle_collector_is_paused_while_nodes_are_read_and_judged_and_back_after(tmp_path, monkeypatch):
    import gc

    import gpudoctor.fleet as fleet_module
    from gpudoctor.fleet import fleet_nodes, read_fleet
    from gpudoctor.snapshot import SnapshotError

    states = []
    real = fleet_module.evaluate
    monkeypatch.setattr(fleet_module, "evaluate",
                        lambda snapshot, rules, **memo: states.append(gc.isenabled()) or real(snapshot, rules, **memo))
    paths = [str(path) for path in write(tmp_path, machine("a"), machine("b"))]
    evaluate_fleet(fleet_nodes(read_fleet(paths), paths), load_catalog())
    assert states == [False, False] and gc.isenabled()
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(SnapshotError):
        read_fleet([str(tmp_path / "broken.json")])
    assert gc.isenabled()


@pytest.mark.parametrize("fmt", ["plain", "rich"])
def test_a_finding_nodes_share_is_drawn_once_and_reads_as_drawn_for_each(tmp_path, monkeypatch, fmt):
    """The text report draws a finding that several nodes share once and writes its text again for the others:
    byte for byte what drawing it for every node gives, colours and all."""
    import io

    import gpudoctor.render.fleet as render_fleet
    from gpudoctor.fleet import fleet_nodes, read_fleet

    small = lambda facts: facts["host"].update(shm_bytes=64 * 2**20)  # noqa: E731
    docs = [machine(f"n{i}", small if i % 2 else None) for i in range(6)]
    for i, doc in enumerate(docs):
        for n, gpu in enumerate(doc["facts"]["nvml"]["gpus"]):
            gpu["uuid"] = f"GPU-{i:08d}-{n:04d}"
    paths = [str(path) for path in write(tmp_path, *docs)]
    fleet = evaluate_fleet(fleet_nodes(read_fleet(paths), paths), load_catalog())
    texts = []
    for drawn_once in (True, False):
        if not drawn_once:
            monkeypatch.setattr(render_fleet, "_draw", lambda console, finding, drawn:
                                render_fleet.render_finding(console, finding))
        out = io.StringIO()
        render_fleet.render(fleet, fmt, out, width=80)
        texts.append(out.getvalue())
    assert texts[0] == texts[1]
    assert texts[0].count("shm-too-small") == 3  # on each of the three nodes with a small /dev/shm
