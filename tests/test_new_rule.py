"""tools/new_rule.py: a new rule's catalog entry and check stub, in its family's module. Its output loads and its
examples run at once; the catalog tests refuse it while a TODO is left, and pass once the TODOs are filled in as it
says (run in a copy of the repository)."""

import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import new_rule  # noqa: E402  (tools/ is no package)


@pytest.mark.parametrize("argv,why", [
    (["GD101", "something-new"], "GD101 exists"),
    (["GD499", "driver-too-old"], "is GD101's"),
    (["GD499", "Not_Kebab"], "not kebab-case"),
    (["GDX01", "something-new"], "is no rule ID"),
    (["GD499", "something-new", "--module", "launch"], "no module of the nccl family"),
])
def test_the_scaffold_refuses_a_taken_id_or_name_and_another_familys_module(argv, why, capsys):
    assert new_rule.main(argv) == 2
    assert why in capsys.readouterr().err


def pytest_in(copy, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=copy,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_scaffolds_rule_passes_the_catalog_tests_once_its_todos_are_filled(tmp_path):
    copy = tmp_path / "repo"
    for part in ("gpudoctor", "rules", "tests", "tools", "docs", "pyproject.toml"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(
            ROOT / part, copy / part, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                         if (ROOT / part).is_dir() else {}))
    rule_id = next(f"GD4{n:02d}" for n in range(99, 0, -1) if not (ROOT / "rules" / "catalog" / f"GD4{n:02d}.toml")
                   .exists())
    done = subprocess.run([sys.executable, "tools/new_rule.py", rule_id, "nccl-scaffold-example"], cwd=copy,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    entry, module = copy / "rules" / "catalog" / f"{rule_id}.toml", copy / "gpudoctor" / "checks" / "nccl.py"
    assert f"stub of {rule_id} in gpudoctor/checks/nccl.py" in done.stdout
    assert "rules/nccl_env.toml" in done.stdout and "docs/rules.md" in done.stdout

    tests = ("tests/test_catalog.py", "tests/test_rule_families.py")
    refused = pytest_in(copy, *tests, "-k", rule_id)
    assert refused.returncode == 1 and "a TODO of tools/new_rule.py" in refused.stdout, refused.stdout[-3000:]

    words = iter(["An example rule fires on its variable.", "It reads the example variable from the environment "
                  "and fires when it is 1.", "A rule made to test the scaffold: nothing breaks when it fires.",
                  "Unset the example variable and run the job again.", "https://example.org/the-source",
                  "the variable set to 1", "the variable set to 0"])
    entry.write_text(re.sub(r'"TODO:[^"]*"', lambda _: f'"{next(words)}"', entry.read_text())
                     .replace("TODO_VARIABLE", "EXAMPLE_VARIABLE"))
    module.write_text(module.read_text().replace("TODO: the rule's logic.", "The example rule's logic.")
                      .replace("TODO: what is wrong, with the figures", "the example variable is set")
                      .replace("TODO_VARIABLE", "EXAMPLE_VARIABLE"))
    (copy / "docs" / "rules.md").write_text(subprocess.run(
        [sys.executable, "-m", "gpudoctor.catalog"], cwd=copy, capture_output=True, text=True, check=True,
        timeout=120).stdout)
    passed = pytest_in(copy, *tests, "-k", f"{rule_id} or generated or family")
    assert passed.returncode == 0, passed.stdout[-3000:]
    assert re.search(r" in [1-9][0-9]* tests", passed.stdout) and rule_id in (copy / "docs" / "rules.md").read_text()
