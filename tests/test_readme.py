"""The README and docs/*.md stay true: every example is real output of an input in the repository, exactly as
`python tools/record_docs.py` records it (see there what an example is), the set-up commands match .ci/run, the
rule table lists the catalog, and every link between pages reaches its page and its #anchor."""

import re
import shlex
import sys

import pytest
from conftest import ROOT

from gpudoctor.catalog import load_catalog
from gpudoctor.hub import known_model

sys.path.insert(0, str(ROOT / "tools"))
from record_docs import PAGES, examples, normal, output, replay, sessions  # noqa: E402  (tools/ is no package)


def _examples():
    return [pytest.param(ex.command, ex.shown, ex.numbers_vary, id=f"{ex.page.name}: {ex.command[:60]}",
                         marks=pytest.mark.slow if ex.command.startswith("gpudoctor bench") else ())  # ranks start
            for ex in examples()]


STALE = "stale: re-record the pages with `python tools/record_docs.py`"


def test_the_pages_have_examples():
    assert len(_examples()) >= 8


@pytest.mark.parametrize("command,block,numbers_vary", _examples())
def test_examples_are_real_output(command, block, numbers_vary):
    for arg in shlex.split(command)[1:]:
        if "/" in arg and not arg.startswith("-"):  # a file of the repository, or a model of rules/models.toml
            assert (ROOT / arg).exists() or known_model(arg), f"{arg}: an example's input must be in the repository"
    assert normal(block, numbers_vary) == normal(output(command, exits=(0, 1)), numbers_vary), STALE


def test_the_readme_shows_a_terminal_session_at_80_and_120_columns():
    assert [width for width, _ in sessions()] == ["80", "120"]


@pytest.mark.parametrize("columns,session", sessions())
def test_the_terminal_sessions_are_real_output(columns, session):
    """A recorded session (`$ cd DIR`, `$ gpudoctor …` and what it printed on a terminal of that width, colours
    left out) is what gpudoctor prints at that width today."""
    assert re.search(r"(?m)^\$ gpudoctor ", session), "no command in the session"
    assert normal(session, False) == normal(replay(session, columns), False), STALE


def test_every_rule_is_in_the_rule_table():
    table = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in load_catalog():
        assert f"| {rule.id} | {rule.name} |" in table, f"{rule.id} missing from the rule table in docs/rules.md"


def test_every_page_is_linked_from_the_readme():
    readme = PAGES[0].read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, f"the README does not link docs/{page.name}"


def _anchors(page) -> set:
    """The #anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to hyphens, a repeated
    heading numbered (-1, -2 …); plus any explicit <a name> / id."""
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    found, seen = set(re.findall(r"<a (?:name|id)=\"([^\"]+)\"", text)), {}
    for heading in re.findall(r"(?m)^#{1,6} +(.+?) *#*$", text):
        slug = re.sub(r"[^\w\- ]", "", re.sub(r"`|\*\*|\]\([^)]*\)", "", heading).lower()).replace(" ", "-")
        found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return found


def test_links_between_pages_resolve():
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)(?:#([^)\s]*))?\)", page.read_text(encoding="utf-8")):
            path = page.parent / target if target else page
            assert path.exists(), f"{page.name}: broken link {target}"
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), f"{page.name}: no #{anchor} in {path.name}"


def test_ci_runs_the_readme_test_command():
    readme = PAGES[0].read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text()
    (torch,) = re.findall(r"pip install -q (torch==[\d.]+)\n", ci)
    assert f"pip install {torch} --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "pip install -e '.[test]' && pytest" in readme
    assert "pip install -q -e '.[test]'" in ci and ci.rstrip().endswith("\npytest")


def test_the_pages_never_say_pip_install_gpudoctor():
    """gpudoctor is not on PyPI: an instruction to install it from there cannot work."""
    for page in [*PAGES, *ROOT.glob("deploy/**/*.md"), *ROOT.glob("deploy/**/*.yaml"), *ROOT.glob("gpudoctor/**/*.py")]:
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"pip3? install (?:-\S+ )*['\"]?gpudoctor(?:\[[\w,]*\])?(?!\s*@|[\w.[-])", text), page
