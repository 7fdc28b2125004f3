"""`gpudoctor preflight`'s parts without a launcher: who the ranks are and where they run, the pairs, who is to
blame, what the report says, and the one-line refusals."""

from __future__ import annotations

import io
import json
import os

import jsonschema
import pytest
from conftest import ROOT, cli_in_process

from gpudoctor.model import PreflightPhase as Phase
from gpudoctor.model import Severity
from gpudoctor.preflight import layout
from gpudoctor.preflight.layout import Expected, Member, expected_layout, label_nodes, node_table
from gpudoctor.preflight.measure import neighbour_pairs, rounds
from gpudoctor.preflight.result import bad_nodes, build, next_steps, odd_nodes


def member(launcher="torchrun", rank=0, world=6):
    return Member(rank=rank, world_size=world, local_rank=0, node_rank=0, host="h", launcher=launcher,
                  master="127.0.0.1", port=29500, agent_store=launcher == "torchrun")


def test_torchrun_nodes_hold_consecutive_ranks():
    env = {"GROUP_WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "2"}
    assert expected_layout(member(), env) == Expected({0: [0, 1], 1: [2, 3], 2: [4, 5]}, {})
    # a layout that does not add up is not guessed
    assert expected_layout(member(), {"GROUP_WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}) == Expected({}, {})


def test_srun_block_distribution_names_the_hosts(monkeypatch):
    import gpudoctor.rendezvous as rendezvous

    monkeypatch.setattr(rendezvous, "slurm_hosts", lambda nodelist: ["gpu-a01", "gpu-a02", "gpu-b07"]
                        if nodelist == "gpu-a[01-02],gpu-b07" else [])
    env = {"SLURM_STEP_TASKS_PER_NODE": "2(x2),1", "SLURM_STEP_NODELIST": "gpu-a[01-02],gpu-b07"}
    expected = expected_layout(member("slurm", world=5), env)
    assert expected == Expected({0: [0, 1], 1: [2, 3], 2: [4]}, {0: "gpu-a01", 1: "gpu-a02", 2: "gpu-b07"})
    # cyclic distribution: a node's tasks are not consecutive, so none is placed before it arrives
    assert expected_layout(member("slurm", world=5), {**env, "SLURM_DISTRIBUTION": "cyclic"}) == Expected({}, {})


def test_nodes_are_named_by_host_or_by_host_and_node_rank():
    expected = Expected({0: [0], 1: [1], 2: [2]}, {})
    shared = [{"rank": 0, "node_rank": 0, "host": "vm"}, {"rank": 1, "node_rank": 1, "host": "vm"}]
    assert label_nodes(shared, expected) == {0: "vm (node 0)", 1: "vm (node 1)", 2: "node rank 2"}
    apart = [{"rank": 0, "node_rank": 0, "host": "a"}, {"rank": 1, "node_rank": 1, "host": "b"}]
    assert label_nodes(apart, Expected(expected.ranks, {2: "c"})) == {0: "a", 1: "b", 2: "c"}


def test_node_table_says_who_arrived():
    arrivals = [{"rank": 0, "node_rank": 0, "host": "a"}, {"rank": 1, "node_rank": 0, "host": "a"}]
    table = node_table(arrivals, Expected({0: [0, 1], 1: [2, 3]}, {}), 4)
    assert table == [{"node": "a", "host": "a", "node_rank": 0, "ranks": [0, 1], "arrived": [0, 1]},
                     {"node": "node rank 1", "host": None, "node_rank": 1, "ranks": [2, 3], "arrived": []}]
    # no layout from the launcher: a rank that never arrived is a node of its own, not guessed onto another
    table = node_table(arrivals, Expected({}, {}), 3)
    assert [(n["node"], n["ranks"], n["arrived"]) for n in table] == [("a", [0, 1], [0, 1]),
                                                                     ("the node of rank 2", [2], [])]


@pytest.mark.parametrize("count, pairs", [(2, []), (3, [(0, 1), (1, 2), (2, 0)]),
                                          (4, [(0, 1), (1, 2), (2, 3), (3, 0)])])
def test_each_node_is_in_two_pairs(count, pairs):
    assert neighbour_pairs(count) == pairs
    for this in rounds(pairs):
        nodes = [node for pair in this for node in pair]
        assert len(nodes) == len(set(nodes))  # a node is in one pair per round
    assert sorted(pair for this in rounds(pairs) for pair in this) == sorted(pairs)


class _Finding:
    def __init__(self, rule, evidence, severity=Severity.ERROR, message="m"):
        self.rule, self.evidence, self.severity, self.message = rule, evidence, severity, message


def test_odd_nodes_are_those_outside_the_largest_group():
    assert odd_nodes(_Finding("GD803", {"nodes": {"LL": ["a", "b"], "LL128": ["c"]}})) == ["c"]
    assert odd_nodes(_Finding("GD801", {"nodes": {"1": ["a"], "2": ["b"]}})) == ["a", "b"]  # a tie blames both
    assert odd_nodes(_Finding("GD805", {"nodes": {"fails": ["b"], "passes": ["a", "c"]}})) == ["b"]


def _verdicts(findings):
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    verdicts = evaluate(Snapshot(facts={}), [])
    return verdicts.__class__(**{**verdicts.__dict__, "findings": tuple(findings)})


def test_next_steps_name_the_hosts_for_the_scheduler():
    nodes = [{"node": "gpu-a02", "host": "gpu-a02", "node_rank": 1}, {"node": "node rank 2", "host": None,
                                                                       "node_rank": 2}]
    verdicts = _verdicts([_Finding("GD807", {"nodes": ["gpu-a02"]}), _Finding("GD806", {"nodes": ["node rank 2"]})])
    bad = bad_nodes({"nodes": nodes}, verdicts, None)
    assert [entry["node"] for entry in bad] == ["gpu-a02", "node rank 2"]
    slurm = next_steps(bad, [], {"SLURM_JOB_ID": "7"})
    assert slurm[0] == "run the job without them: sbatch --exclude=gpu-a02 …"
    assert slurm[1] == 'for an administrator: scontrol update nodename=gpu-a02 state=drain reason="gpudoctor ' \
                       'preflight: GD806,GD807"'
    assert "node rank 2: no rank of it arrived" in slurm[2]
    k8s = next_steps(bad, [], {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert "kubernetes.io/hostname NotIn [gpu-a02]" in k8s[0] and k8s[1].startswith("for an administrator: "
                                                                                   "kubectl taint nodes gpu-a02 ")
    assert next_steps([], [], {"SLURM_JOB_ID": "7"}) == []


def test_the_text_report_shows_phases_figures_and_what_to_do():
    from gpudoctor.catalog import load_catalog
    from gpudoctor.engine import evaluate
    from gpudoctor.render.preflight import render
    from gpudoctor.snapshot import Snapshot

    facts = {"device": "cpu", "backend": "gloo", "failure": None,
             "nodes": [{"node": n, "host": n, "node_rank": k, "ranks": [k], "arrived": [k]}
                       for k, n in enumerate(["a", "b", "c"])],
             "gpus": [{"node": n, "rank": k, "index": None, "uuid": None, "name": "CPU", "dtype": "float32",
                       "gemm_tflops": t, "copy_gbps": 3.0} for k, (n, t) in enumerate([("a", .04), ("b", .01),
                                                                                           ("c", .04)])]}
    rules = [rule for rule in load_catalog() if rule.id in ("GD806", "GD807", "GD808")]
    verdicts = evaluate(Snapshot(facts={"preflight": facts}), rules)
    report = build(facts=facts, verdicts=verdicts, fleet=None, environ={"SLURM_JOB_ID": "1"}, launcher="torchrun",
                   world_size=3, budget_s=60, phases=(Phase("meet", "ok", 0.2, "3 ranks"), Phase("agree", "ok", 3.1),
                                                      Phase("gpus", "ok", 1.0), Phase("fabric", "skipped")),
                   seconds=4.5)
    out = io.StringIO()
    render(report, "plain", out, width=100)
    text = out.getvalue()
    assert " ✓ meet              0.2 s  3 ranks" in text and " - fabric" in text
    assert "GD807" in text and "b (rank 1) is a straggler" in text
    assert "sbatch --exclude=b …" in text and "scontrol update nodename=b state=drain" in text
    out = io.StringIO()
    render(report, "json", out)
    doc = json.loads(out.getvalue())
    assert doc["schema"] == "gpudoctor.preflight/1" and doc["ok"] is False
    jsonschema.validate(doc, json.loads((ROOT / "docs" / "schemas" / "preflight.schema.json").read_text()))
    assert [(e["node"], [r["rule"] for r in e["reasons"]]) for e in doc["bad_nodes"]] == [("b", ["GD807"])]


def test_without_a_launcher_it_says_how_to_start_it_in_one_line():
    result = cli_in_process("preflight", env={k: None for k in os.environ if k.startswith(("RANK", "WORLD_SIZE",
                                                                                           "SLURM_"))})
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "torchrun" in result.stderr and "srun" in result.stderr


@pytest.mark.parametrize("args, env, said", [
    (["--timeout", "90"], {}, "--timeout 90 is longer than --budget 60"),
    (["--budget", "0"], {}, "--budget"),
    (["--budget", "nan"], {}, "--budget"),
    ([], {"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "RANK=3"),
])
def test_bad_options_and_launcher_values_are_one_line(args, env, said):
    result = cli_in_process("preflight", *args, env=env)
    assert result.returncode == 2 and said in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_on_kubernetes_a_node_is_named_by_the_node_the_pod_runs_on():
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NODE_NAME": "gpu-node-7"}
    assert layout.node_host(pod) == "gpu-node-7"
    assert layout.node_host({"NODE_NAME": "gpu-node-7"}) == os.uname().nodename  # NODE_NAME alone: not a pod


DEFAULT_LIMITS = {"straggler": {"below_median": 0.5}, "gemm": {"datasheet_fraction": 0.5},
                  "fabric": {"below_median": 0.5}}


def _options_of(monkeypatch, *args, cwd):
    """The Options `gpudoctor preflight ARGS` hands to the phases (stopped there: no launcher is needed)."""
    from gpudoctor.preflight import PreflightError, run

    seen = []

    def stop(options):
        seen.append(options)
        raise PreflightError("preflight: stopped by the test")

    monkeypatch.setattr(run, "run", stop)
    result = cli_in_process("preflight", *args, cwd=cwd)
    assert result.returncode == 2 and "stopped by the test" in result.stderr, result.stderr
    return seen[0]


def test_a_site_policy_sets_the_fractions_the_verdicts_judge_by(tmp_path, monkeypatch):
    (tmp_path / "site.toml").write_text('schema = "gpudoctor.policy/1"\n[preflight.straggler]\nbelow_median = 0.85\n'
                                        '[preflight.fabric]\nbelow_median = 0.7\n', encoding="utf-8")
    expected = {**DEFAULT_LIMITS, "straggler": {"below_median": 0.85}, "fabric": {"below_median": 0.7}}
    assert _options_of(monkeypatch, "--policy", tmp_path / "site.toml", cwd=tmp_path).limits == expected
    # the same file named by the project's [tool.gpudoctor]
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\npolicy = "site.toml"\n', encoding="utf-8")
    assert _options_of(monkeypatch, cwd=tmp_path).limits == expected
    (tmp_path / "pyproject.toml").unlink()
    assert _options_of(monkeypatch, cwd=tmp_path).limits == DEFAULT_LIMITS


def test_the_verdicts_judge_by_the_recorded_fractions():
    """A GPU at 80 % of the median passes the default half and is a straggler under a site's 0.85; a pair at two thirds
    of the median pair likewise under a site's 0.7 (what GD807 and GD809 read is what preflight recorded)."""
    from gpudoctor.catalog import load_catalog
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    rules = [rule for rule in load_catalog() if rule.id in ("GD807", "GD809")]
    gpus = [{"node": n, "rank": k, "index": 0, "uuid": f"GPU-{k}", "name": "NVIDIA H100 80GB HBM3",
             "dtype": "bfloat16", "gemm_tflops": t, "copy_gbps": 2600.0}
            for k, (n, t) in enumerate([("a", 700.0), ("b", 690.0), ("c", 560.0), ("d", 700.0)])]
    pairs = [{"nodes": pair, "busbw_gbps": bw, "wrong": 0}
             for pair, bw in [(["a", "b"], 100.0), (["b", "c"], 50.0), (["c", "d"], 50.0), (["d", "a"], 100.0)]]
    facts = {"device": "cuda", "gpus": gpus, "fabric": {"intra": [], "cross": None, "pairs": pairs,
                                                        "min_busbw_gbps": None}}

    def named(limits):
        report = evaluate(Snapshot(facts={"preflight": {**facts, **limits}}), rules)
        return sorted((f.rule, tuple(f.evidence["nodes"])) for f in report.findings)

    assert named({}) == named({"limits": DEFAULT_LIMITS}) == []
    strict = {**DEFAULT_LIMITS, "straggler": {"below_median": 0.85}, "fabric": {"below_median": 0.7}}
    assert named({"limits": strict}) == [("GD807", ("c",)), ("GD809", ("c",))]
