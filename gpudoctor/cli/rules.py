"""`gpudoctor rules` and `gpudoctor explain ID`: the catalog and one rule's documentation."""

from __future__ import annotations

import argparse
import json
import sys

from gpudoctor.catalog import find_rule, load_catalog
from gpudoctor.cli.common import UsageError, add_policy_option, policy_rules


def add_parser(subparsers) -> None:
    listing = subparsers.add_parser("rules", help="list the rules")
    listing.add_argument("--format", choices=("plain", "json"), default="plain")
    add_policy_option(listing)
    listing.set_defaults(run=run_rules)
    explain = subparsers.add_parser("explain", help="show one rule's documentation")
    explain.add_argument("rule", metavar="ID", help="rule ID, e.g. GD101")
    explain.add_argument("--format", choices=("plain", "json"), default="plain")
    add_policy_option(explain)
    explain.set_defaults(run=run_explain)


def rule_json(rule, full: bool = False) -> dict:
    data = {"id": rule.id, "name": rule.name, "severity": str(rule.severity), "family": rule.family,
            "summary": rule.summary, "fix_applicability": rule.fix_applicability}
    if full:
        data.update(needs=list(rule.needs), optional=list(rule.optional), host=rule.host, docs=dict(rule.docs))
    return data


def run_rules(args: argparse.Namespace) -> int:
    rules = load_catalog() + policy_rules(args)
    if args.format == "json":
        json.dump({"schema": "gpudoctor.rules/1", "rules": [rule_json(r) for r in rules]}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for rule in rules:
        print(f"{rule.id}  {rule.name:<34} {str(rule.severity):<8} {rule.summary}")
    return 0


def run_explain(args: argparse.Namespace) -> int:
    rule = find_rule(args.rule) or next((r for r in policy_rules(args) if r.id == args.rule.strip().upper()), None)
    if rule is None:
        raise UsageError(f"no rule {args.rule!r} (see `gpudoctor rules`)")
    if args.format == "json":
        json.dump(rule_json(rule, full=True), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    from rich.console import Console  # only here: every other command starts without rich
    from rich.markup import escape

    console = Console(highlight=False, emoji=False)
    console.print(f"[bold]{rule.id} {rule.name}[/] ({rule.severity}, {rule.family})")
    console.print(escape(rule.summary))
    for title, key in (("What it checks", "what"), ("Why it matters", "why"), ("How to fix", "fix")):
        console.print(f"\n[bold]{title}[/]\n{escape(rule.docs.get(key, ''))}")
    references = rule.docs.get("references", [])
    if references:
        console.print("\n[bold]References[/]")
        for ref in references:
            console.print(f"  {escape(ref)}")
    return 0
