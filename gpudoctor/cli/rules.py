"""`gpudoctor rules` and `gpudoctor explain ID`: the catalog and one rule's documentation."""

from __future__ import annotations

import argparse
import json
import sys

from gpudoctor.catalog import INPUTS, catalog_json, closest_rules, find_rule, load_catalog, quoted_id, rule_json
from gpudoctor.cli.common import UsageError, add_policy_option, policy_rules
from gpudoctor.render import terminal
from gpudoctor.render.printable import printable_data
from gpudoctor.render.terminal import fix_block, say, say_block, screen, width, wrap


def add_parser(subparsers) -> None:
    listing = subparsers.add_parser("rules", help="list the rules")
    listing.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    add_policy_option(listing)
    listing.set_defaults(run=run_rules)
    explain = subparsers.add_parser("explain", help="show one rule's documentation")
    explain.add_argument("rule", metavar="ID", help="rule ID, e.g. GD101")
    explain.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    add_policy_option(explain)
    explain.set_defaults(run=run_explain)


def run_rules(args: argparse.Namespace) -> int:
    rules = load_catalog() + policy_rules(args)
    if args.format == "json":
        json.dump(catalog_json(rules), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    rules = printable_data(rules)  # a site policy's names and texts are shown escaped
    line_width = width(sys.stdout)
    id_width = max(len(rule.id) for rule in rules)
    name_width = max(len(rule.name) for rule in rules)
    for rule in rules:
        head = f"{rule.id:<{id_width}}  {rule.name:<{name_width}} {str(rule.severity):<8} "
        if line_width - len(head) >= 40:
            lines = wrap(rule.summary, line_width, head, " " * len(head))
        else:  # the summary goes below the name
            lines = [head.rstrip()] + wrap(rule.summary, line_width, " " * (id_width + 2), " " * (id_width + 2))
        print("\n".join(lines))
    return 0


def run_explain(args: argparse.Namespace) -> int:
    rule = find_rule(args.rule) or next((r for r in policy_rules(args) if r.id == args.rule.strip().upper()), None)
    if rule is None:
        close = closest_rules(args.rule, [r.id for r in load_catalog()])
        hint = f"did you mean {close[0]}?" if close else "see `gpudoctor rules`"
        raise UsageError(f"no rule {quoted_id(args.rule)} ({hint})")
    if args.format == "json":
        json.dump(rule_json(rule, full=True), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    from rich.text import Text  # only here: every other command starts without rich

    rule = printable_data(rule)  # a site policy's texts are shown escaped

    with screen(sys.stdout, terminal.color(sys.stdout, args.no_color)) as console:
        console.print(Text.assemble((f"{rule.id} {rule.name}", "bold"), f" ({rule.severity}, {rule.family})"))
        say(console, rule.summary)
        if rule.inputs:
            say(console, "Not applicable (neither passed nor failed) when there is "
                + " and ".join(INPUTS[name].reason for name in rule.inputs) + ".", style="dim")
        for title, key in (("What it checks", "what"), ("Why it matters", "why"), ("How to fix", "fix")):
            console.print()
            console.print(Text(title, style="bold"))
            text, block = fix_block(rule.docs.get(key, "")) if key == "fix" else (rule.docs.get(key, ""), [])
            say(console, text)
            say_block(console, block)
        references = rule.docs.get("references", [])
        if references:
            console.print()
            console.print(Text("References", style="bold"))
            for ref in references:
                say(console, ref, "  ", "  ")
    return 0
