"""A rule's words are said once, in its catalog file (docs/rules.md is generated from the catalog), and its code is
found from its ID: the first digit names its family, and the family's modules of gpudoctor/checks/ hold it."""

import ast
import inspect

import pytest
from conftest import ROOT

from gpudoctor.catalog import FAMILIES, family_of, load_catalog, markdown

CHECKS = ROOT / "gpudoctor" / "checks"


def rule_modules() -> set:
    """The modules of gpudoctor/checks/ that hold at least one `@check("GDnnn")`."""
    found = set()
    for path in CHECKS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "check":
                found.add(path.stem)
    return found


def test_docs_rules_md_is_generated_from_the_catalog():
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == markdown(), \
        "docs/rules.md is stale: python -m gpudoctor.catalog > docs/rules.md"


def test_every_rule_module_belongs_to_one_family():
    listed = [module for family in FAMILIES.values() for module in family.modules]
    assert len(listed) == len(set(listed)), "a module is listed under two families"
    unlisted = sorted(rule_modules() - set(listed))
    assert not unlisted, f"{unlisted}: modules of gpudoctor/checks/ with rules that FAMILIES (gpudoctor/catalog.py) " \
                         "does not list under their family"
    assert set(listed) <= rule_modules(), "FAMILIES lists a module that holds no rule"
    assert list(FAMILIES) == [f"GD{digit}" for digit in range(10)]


@pytest.mark.parametrize("rule", load_catalog(), ids=lambda r: r.id)
def test_a_rules_code_is_in_a_module_of_its_family(rule):
    family = family_of(rule.id)
    module = rule.check.__module__.rsplit(".", 1)[1]
    assert family is not None and rule.family == family.name
    assert module in family.modules, f"{rule.id} is in checks/{module}.py, not in a {family.name} module " \
                                     f"({', '.join(family.modules)})"
    assert "TODO" not in inspect.getsource(rule.check), f"{rule.id}: a TODO of tools/new_rule.py is left in its check"
