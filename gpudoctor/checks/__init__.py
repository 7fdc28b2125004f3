"""The Python logic of the rules. Each module registers its functions with `@check("GDxxx")`.

A check is `def fn(facts: Facts, rule: Rule) -> Iterable[Finding]`: it yields findings (none = passed),
raises `MissingFact` through `facts.get(...)` when a fact it needs is unknown, and never does I/O. Every module
here is rules of one family (GD0 doctor.py, GD1 driver_cuda.py, GD4 nccl*.py …); what several rules read the same
way lives in gpudoctor.facts.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Dict

_CHECKS: Dict[str, Callable] = {}


def check(rule_id: str) -> Callable:
    """Register the decorated function as the logic of `rule_id`."""

    def register(fn: Callable) -> Callable:
        if rule_id in _CHECKS:
            raise RuntimeError(f"two checks for {rule_id}")
        _CHECKS[rule_id] = fn
        return fn

    return register


def registered_checks() -> Dict[str, Callable]:
    """Import every module of this package once and return the registry."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return dict(_CHECKS)
