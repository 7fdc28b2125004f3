"""The README stays true: its set-up commands match .ci/run and its rule table lists the catalog."""

from conftest import ROOT
from gpudoctor.catalog import load_catalog

README = (ROOT / "README.md").read_text()


def test_every_rule_is_in_the_readme_table():
    for rule in load_catalog():
        assert f"| {rule.id} | {rule.name} |" in README, f"{rule.id} missing from the README rule table"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install torch==2.13.0 && pip install -e '.[test]' && pytest" in README
    for step in ("pip install -q torch==2.13.0", "pip install -q -e '.[test]'", "\npytest"):
        assert step in ci
    assert "pip install -e . && gpudoctor check" in README
