"""The Python logic of the rules. Each module registers its functions with `@check("GDxxx")`.

A check is `def fn(facts: Facts, rule: Rule) -> Iterable[Finding]`: it yields findings (none = passed),
raises `MissingFact` through `facts.get(...)` when a fact it needs is unknown, and never does I/O. A rule that judges
a machine may also say what a log proves for it (`@check("GDxxx", from_log=fn)`, same signature, reading
`logs.events`): where the machine facts find nothing or are unknown, those findings stand (gpudoctor.verdict).
Every module here holds rules of one family, and FAMILIES (gpudoctor.catalog) names each family's modules, so a
rule's code is found from its ID; what several rules read the same way lives in gpudoctor.facts."""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Iterable, Optional, Tuple

_CHECKS: Dict[str, Callable] = {}
_FROM_LOG: Dict[str, Callable] = {}


def check(rule_id: str, from_log: Optional[Callable] = None) -> Callable:
    """Register the decorated function as the logic of `rule_id` (`from_log`: what a log proves for it)."""

    def register(fn: Callable) -> Callable:
        if rule_id in _CHECKS:
            raise RuntimeError(f"two checks for {rule_id}")
        _CHECKS[rule_id] = fn
        if from_log is not None:
            _FROM_LOG[rule_id] = from_log
        return fn

    return register


def _import(modules: Optional[Iterable[str]] = None) -> None:
    """Import the named modules of this package (all of them when None); Python imports each once."""
    if modules is None:
        import pkgutil  # here: a run of a few rules imports their families' modules by name

        modules = [module.name for module in pkgutil.iter_modules(__path__)]
    for name in modules:
        importlib.import_module(f"{__name__}.{name}")


def registered_check(rule_id: str, modules: Optional[Iterable[str]] = None) -> Tuple[Optional[Callable],
                                                                                       Optional[Callable]]:
    """(check, log reader) of `rule_id`, importing `modules` (its family's; all when None) the first time."""
    if rule_id not in _CHECKS:
        _import(modules)
    return _CHECKS.get(rule_id), _FROM_LOG.get(rule_id)


def registered_checks() -> Dict[str, Callable]:
    """Import every module of this package once and return the registry."""
    _import()
    return dict(_CHECKS)


def registered_log_readers() -> Dict[str, Callable]:
    """The rules' readers of log evidence (`check(..., from_log=fn)`), by rule ID."""
    _import()
    return dict(_FROM_LOG)
