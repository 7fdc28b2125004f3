"""Start a new rule: its catalog entry, with a firing and a passing example, and the stub of its check in its
family's module; then say what else to touch.

    python tools/new_rule.py GD427 nccl-something-wrong [--severity warning] [--module nccl_logs]

The entry and the stub work together at once (the firing example fires, the passing one passes) on a placeholder
variable; every `TODO` in them is to be replaced with the rule's own facts, logic and words, and the catalog tests
fail while one is left. A rule's family is the first digit of its ID (FAMILIES in gpudoctor/catalog.py): the stub
goes in the family's first module unless `--module` names another of them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the gpudoctor of this checkout

from gpudoctor.catalog import FAMILIES, RULE_ID  # noqa: E402
from gpudoctor.data import load_toml  # noqa: E402

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
VARIABLE = "TODO_VARIABLE"  # the placeholder fact the stub and the examples share

ENTRY = '''id = "{id}"
name = "{name}"
severity = "{severity}"
summary = "TODO: one sentence: what makes the rule fire."
needs = ["env"]
host = false
fix_applicability = "display-only"

[docs]
what = "TODO: what the rule checks, from which facts, and what it leaves alone."
why = "TODO: what breaks or slows down when it fires, as the upstream project documents it."
fix = "TODO: how to fix it; a command goes on its own line after `$ `."
references = ["TODO: the upstream documentation or code the rule follows"]

[[examples]]
name = "TODO: a real case that fires"
fires = true
[examples.facts.env]
{variable} = "1"

[[examples]]
name = "TODO: the same case, fixed"
fires = false
[examples.facts.env]
{variable} = "0"
'''

STUB = '''

# --- {id} {name} {rule_line}

@check("{id}")
def {function}(facts, rule):
    """TODO: the rule's logic. It reads only `facts` (gpudoctor.facts.Facts: `facts.get("env")` raises MissingFact
    for a fact that is unknown, so the rule is unknown, never passed); what several rules read the same way is in
    gpudoctor/facts/."""
    value = facts.get("env").get("{variable}")
    if value == "1":
        yield rule.finding(f"TODO: what is wrong, with the figures ({variable}={{value}})",
                           evidence={{"{variable}": value}}, fix=rule.fix())
'''

ALSO = {  # family prefix -> what else a rule of that family usually touches
    "GD1": ["a driver, toolkit or wheel the rule knows goes in rules/cuda_driver.toml or rules/torch_wheels.toml, "
            "with its source"],
    "GD3": ["a DeepSpeed config key comes from rules/deepspeed_config.toml (generated: tools/gen_deepspeed_config.py); "
            "a DeepSpeed build variable or op goes in rules/deepspeed_env.toml"],
    "GD4": ["a new NCCL_* or TORCH_NCCL_* variable the rule reads goes in rules/nccl_env.toml ([var.NAME], with its "
            "values and source), or GD401 calls it unknown; an NVTE_* variable comes from rules/te_env.toml "
            "(generated: tools/gen_te_env.py)"],
    "GD5": ["an Xid goes in rules/xid.toml, a GPU model in rules/gpus.toml"],
    "GD6": ["a scheduler or launcher the rule knows goes in rules/launch.toml"],
}


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python tools/new_rule.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("id", help="the new rule's ID, GDnnn (its first digit is its family)")
    parser.add_argument("name", help="its name, in kebab-case (nccl-something-wrong)")
    parser.add_argument("--severity", choices=("error", "warning", "info"), default="warning")
    parser.add_argument("--module", help="the module of gpudoctor/checks/ for its check (one of its family's)")
    return parser.parse_args(argv)


def refusal(args: argparse.Namespace) -> Optional[str]:
    """Why this rule cannot be started (a taken ID or name, a module of another family), else None."""
    family = FAMILIES.get(args.id[:3])
    if not RULE_ID.match(args.id) or family is None:
        return f"{args.id!r} is no rule ID (GDnnn)"
    if not KEBAB.match(args.name):
        return f"{args.name!r} is not kebab-case (nccl-something-wrong)"
    catalog = ROOT / "rules" / "catalog"
    if (catalog / f"{args.id}.toml").exists():
        return f"{args.id} exists: rules/catalog/{args.id}.toml"
    taken = next((path.stem for path in catalog.glob("GD*.toml") if load_toml(path).get("name") == args.name), None)
    if taken:
        return f"the name {args.name!r} is {taken}'s"
    if args.module and args.module not in family.modules:
        return f"{args.module!r} is no module of the {family.name} family ({', '.join(family.modules)})"
    return None


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    why = refusal(args)
    if why:
        print(f"new_rule: {why}", file=sys.stderr)
        return 2
    family = FAMILIES[args.id[:3]]
    module = args.module or family.modules[0]
    entry = ROOT / "rules" / "catalog" / f"{args.id}.toml"
    code = ROOT / "gpudoctor" / "checks" / f"{module}.py"
    entry.write_text(ENTRY.format(id=args.id, name=args.name, severity=args.severity, variable=VARIABLE),
                     encoding="utf-8")
    head = f"# --- {args.id} {args.name} "
    with code.open("a", encoding="utf-8") as out:
        out.write(STUB.format(id=args.id, name=args.name, rule_line="-" * max(3, 117 - len(head)),
                              function=args.name.replace("-", "_"), variable=VARIABLE))
    steps = [
        f"replace every TODO in {entry.relative_to(ROOT)} and in {args.id} at the end of "
        f"{code.relative_to(ROOT)}: the facts the check reads (`needs`; a fact no probe or reader writes yet is "
        "declared in rules/facts.toml first, then `python -m gpudoctor.schema > docs/snapshot.md`), its logic, its "
        "words, a firing and a passing example from a real case",
        "a rule that judges only an input a run may lack (a DeepSpeed config, a script, a log, job files, a "
        "benchmark, several nodes, a model) names it: `input = \"...\"` (gpudoctor.catalog.INPUTS)",
        "a message a log prints that feeds the rule goes in the message atlas, rules/messages/*.toml, with a real "
        "sample",
        *ALSO.get(args.id[:3], []),
        "python -m gpudoctor.catalog > docs/rules.md",
        f"pytest tests/test_catalog.py tests/test_rule_families.py -q -k {args.id}",
    ]
    print(f"wrote {entry.relative_to(ROOT)} and the stub of {args.id} in {code.relative_to(ROOT)} "
          f"({family.name} family)")
    print("next:")
    print("\n".join(f"  {number}. {step}" for number, step in enumerate(steps, 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
