"""`gpudoctor fix` converges: applying its env changes twice is applying them once, and the rules run again on the
fixed environment find nothing `fix` would change. Checked on every firing catalog example of every rule whose fix
is an env change, with every rule running (two rules must not undo each other's fixes), and end to end on a file."""

import copy

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.fix import applied, converged_plan, still_to_change
from gpudoctor.snapshot import Snapshot

RULES = load_catalog()


def _plan(facts: dict):
    return converged_plan(facts, RULES, evaluate(Snapshot(facts=copy.deepcopy(facts)), RULES), unsafe=True)


def _env_fix_examples():
    found = []
    for rule in RULES:
        for example in rule.examples:
            if not example.fires:
                continue
            report = evaluate(Snapshot(facts=copy.deepcopy(dict(example.facts))), [rule])
            if any(f.fix and f.fix.env for f in report.findings):
                found.append(pytest.param(dict(example.facts), id=f"{rule.id}: {example.name}"))
    return found


EXAMPLES = _env_fix_examples()


def test_there_are_env_fixes_to_check():
    assert len({p.id.split(":")[0] for p in EXAMPLES}) >= 14


@pytest.mark.parametrize("facts", EXAMPLES)
def test_fix_twice_is_fix_once(facts):
    once = applied(facts, _plan(facts).changes)
    again = _plan(once)
    assert not again.clashes
    leftover = [c.describe() for c in still_to_change(once["env"], again.changes)]
    assert not leftover, f"after fix, a second fix still changes: {leftover}"


def test_gd404_removes_a_legacy_name_whose_replacement_is_a_debugging_switch():
    facts = {"env": {"NCCL_BLOCKING_WAIT": "1"}, "torch": {"version": "2.4.0"}}
    report = evaluate(Snapshot(facts=facts), [r for r in RULES if r.id in ("GD404", "GD409")])
    fixes = {f.rule: f.fix.env for f in report.findings}
    assert fixes["GD404"].unset == ("NCCL_BLOCKING_WAIT",) and not fixes["GD404"].set
    assert "debugging switch (GD409)" in report.findings[0].message


def test_write_env_twice_changes_nothing_the_second_time(run_cli, tmp_path):
    """A user's .env for a torchrun job, with a legacy blocking-wait switch, a misspelt NCCL_DEBUG and a pinned
    algorithm: one `fix --unsafe` run settles it, and `check` on the result asks for nothing more."""
    from conftest import FIXTURES

    machine = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"
    target = tmp_path / ".env"
    target.write_text("# torchrun --nproc-per-node 4 train.py\nNCCL_BLOCKING_WAIT=1\nNCC_DEBUG=INFO\n"
                      "NCCL_ALGO=Tree\nOMP_NUM_THREADS=8\n")
    argv = ["fix", "--snapshot", machine, "--env-file", target, "--write-env", target, "--unsafe", "--quiet"]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    written = target.read_text()
    assert "\nNCCL_BLOCKING_WAIT=1" not in written and "TORCH_NCCL_BLOCKING_WAIT" not in written.split(">>>")[-1]
    code, out, _ = run_cli(*argv)
    assert code == 0 and "0 changes, 0 additions, 0 conflicts." in out and target.read_text() == written
