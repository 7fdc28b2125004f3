"""The YAML of a manifest as PyYAML's safe composer gives it (nodes keep their lines), composed once per file and
walked once: every collector (the env reader, the pod reader) is handed each node of that one walk."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

Documents = List[Tuple[int, yaml.Node]]
MAX_DEPTH = 60
SKIPPED = ("env", "command", "args")  # read by the collectors from their container, never walked into


def compose(text: str) -> Tuple[Documents, Optional[BaseException]]:
    """(index, node) of each non-empty document up to the first error, and that error (YAMLError, RecursionError)."""
    documents: Documents = []
    try:
        for index, document in enumerate(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))):
            if document is not None:
                documents.append((index, document))
    except (yaml.YAMLError, RecursionError) as exc:
        return documents, exc
    return documents, None


TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}")  # Helm/Go and Jinja expressions, tags, comments
KEPT = re.compile(r"gdtpl(\d+)x")


def compose_template(text: str) -> Tuple[Documents, Optional[BaseException]]:
    """A Helm or Jinja template read as the manifest it renders to: a line that is only template tags
    (`{{- define … }}`, `{% if … %}`) is left out, and an expression inside a value stays that value's text
    (`nvidia.com/gpu: {{ .Values.gpus }}`), a value the template's caller decides."""
    kept: List[str] = []

    def keep(match) -> str:
        kept.append(match.group(0))
        return f"gdtpl{len(kept) - 1}x"

    lines = ["" if TEMPLATE.search(line) and not TEMPLATE.sub("", line).strip() else TEMPLATE.sub(keep, line)
             for line in text.split("\n")]
    documents, error = compose("\n".join(lines))
    stack, seen = [node for _, node in documents], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue  # an alias: the node is read once
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode) and "gdtpl" in node.value:
            node.value = KEPT.sub(lambda match: kept[int(match.group(1))], node.value)
        elif isinstance(node, yaml.MappingNode):
            stack += [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    return documents, error


def config_maps(documents: Documents) -> dict:
    """{name: {key: (value, line)}} of the file's ConfigMaps, for the containers that take their env from them."""
    found = {}
    for _, document in documents:
        top = mapping(document)
        if "kind" in top and scalar(top["kind"][1]) == "ConfigMap" and "data" in top:
            name = scalar(mapping(top["metadata"][1] if "metadata" in top else None).get("name", (None, None))[1])
            found[name] = {key: (scalar(value), line(value)) for key, (_, value) in mapping(top["data"][1]).items()
                           if scalar(value) is not None}
    return found


def scalar(node) -> Optional[str]:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def line(node) -> int:
    return node.start_mark.line + 1


def mapping(node, depth: int = 0) -> dict:
    """key text -> (key node, value node) of a mapping node (later duplicate keys win, as in Kubernetes), YAML merge
    keys included (`<<: *gpu`, Compose's `x-` anchors): the keys written in the mapping win over the merged ones."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    found: Dict[str, Any] = {}
    merged: Dict[str, Any] = {}
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "<<" and key.tag.endswith(":merge") and depth < 8:
            for source in value.value if isinstance(value, yaml.SequenceNode) else [value]:
                merged = {**mapping(source, depth + 1), **merged}
        elif isinstance(key, yaml.ScalarNode):
            found[key.value] = (key, value)
    return {**merged, **found}


class Collector:
    """What one reader takes from the walk; every hook is optional."""

    def document(self, index: int, top: dict, kind: Optional[str], label: str) -> None:
        """A document starts (`top`: its mapping, `label`: "Kind name" or "document N")."""

    def service(self, name: str, fields: dict, index: int) -> None:
        """A service of a Docker Compose file (`fields`: its mapping)."""

    def enter(self, node: yaml.MappingNode, fields: dict, trail: List[str], depth: int) -> None:
        """A mapping, before the nodes under it (`trail`: the keys and positions that lead to it)."""

    def leave(self, node: yaml.MappingNode, fields: dict, trail: List[str], depth: int) -> None:
        """The same mapping, after the nodes under it."""

    def done(self) -> None:
        """The document is walked."""


def walk(documents: Documents, collectors: Sequence[Collector]) -> Optional[RecursionError]:
    """Walk every document once for all the collectors; the RecursionError that stopped it, if any. An alias is
    walked once per document, so `*a` nine levels deep is not 9^9 nodes."""
    try:
        for index, node in documents:
            _document(index, node, collectors)
    except RecursionError as exc:
        return exc
    return None


def _document(index: int, node, collectors: Sequence[Collector]) -> None:
    top = mapping(node)
    kind = scalar(top["kind"][1]) if "kind" in top else None
    meta = mapping(top["metadata"][1]) if "metadata" in top else {}
    name = scalar(meta["name"][1]) if "name" in meta else None
    label = " ".join(part for part in (kind, name) if part) or f"document {index + 1}"
    for collector in collectors:
        collector.document(index, top, kind, label)
    if kind is None and "services" in top and isinstance(top["services"][1], yaml.MappingNode):
        for service_name, (_, service) in mapping(top["services"][1]).items():
            for collector in collectors:
                collector.service(service_name, mapping(service), index)
    else:
        _node(node, collectors, [], 0, set())
    for collector in collectors:
        collector.done()


def _node(node, collectors: Sequence[Collector], trail: List[str], depth: int, seen: set) -> None:
    if depth > MAX_DEPTH or id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        fields = mapping(node)
        for collector in collectors:
            collector.enter(node, fields, trail, depth)
        for key, (_, value) in fields.items():
            if key not in SKIPPED:
                _node(value, collectors, trail + [key], depth + 1, seen)
        for collector in collectors:
            collector.leave(node, fields, trail, depth)
    elif isinstance(node, yaml.SequenceNode):
        for position, item in enumerate(node.value):
            _node(item, collectors, trail + [str(position)], depth + 1, seen)
