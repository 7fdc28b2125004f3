"""The fact contract, held in tests: reading a fact path or a record's key that rules/facts.toml does not declare
raises UndeclaredFact instead of reading as unknown (a misspelt key would otherwise make a rule pass silently).

Switched on by GPUDOCTOR_STRICT_FACTS=1 (tests/conftest.py sets it); off, nothing is checked or wrapped, so a
user's run never stops on it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Mapping

if TYPE_CHECKING:  # imported when a test reads strictly: a user's run never pays for it
    from gpudoctor.schema import Shape

VARIABLE = "GPUDOCTOR_STRICT_FACTS"


class UndeclaredFact(AssertionError):
    """A read of a fact path or record key that rules/facts.toml does not declare."""


def strict() -> bool:
    return os.environ.get(VARIABLE) == "1"


def declared(names: List[str]) -> Shape:
    """The shape of the fact at the path; UndeclaredFact when facts.toml does not declare it."""
    from gpudoctor import schema

    error = schema.path_error(names)
    if error:
        raise UndeclaredFact(f"read of {'.'.join(names)}: {error}")
    return schema.shape_at(names)


def guarded(value: Any, shape: Shape, where: str) -> Any:
    """The value with each record in it a Record that refuses undeclared keys (the value itself where nothing is
    declared below it)."""
    if shape.fields is None and shape.values is None:
        return value
    if isinstance(value, list):
        return [guarded(item, shape, where) for item in value]
    if not isinstance(value, Mapping):
        return value
    if shape.values is not None:  # a map: any name, each value of the declared shape
        return {key: guarded(item, shape.values, f"{where}.{key}") for key, item in value.items()}
    return Record(value, shape, where)


class Record(dict):
    """A fact's object whose keys facts.toml declares: reading another key (`get`, `[]`, `in`) raises."""

    __slots__ = ("_shape", "_where")

    def __init__(self, value: Mapping[str, Any], shape: Shape, where: str):
        from gpudoctor.schema import FREE

        fields = shape.fields or {}
        super().__init__((key, guarded(item, fields.get(key, FREE), f"{where}.{key}"))
                         for key, item in value.items())
        self._shape = shape
        self._where = where

    def _check(self, key: Any) -> None:
        if key not in (self._shape.fields or {}):
            raise UndeclaredFact(f"read of {self._where}.{key}: {self._where} has no key {key!r}; declare it in "
                                 f"{self._shape.table} of rules/facts.toml")

    def __getitem__(self, key: Any) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key: Any) -> bool:
        self._check(key)
        return super().__contains__(key)
