"""The YAML of a manifest as PyYAML's safe composer gives it (nodes keep their lines), read once per file."""

from __future__ import annotations

from typing import List, Optional, Tuple

import yaml


Documents = List[Tuple[int, yaml.Node]]


def compose(text: str) -> Tuple[Documents, Optional[BaseException]]:
    """(index, node) of each non-empty document up to the first error, and that error (YAMLError, RecursionError)."""
    documents: Documents = []
    try:
        for index, document in enumerate(yaml.compose_all(text, Loader=yaml.SafeLoader)):
            if document is not None:
                documents.append((index, document))
    except (yaml.YAMLError, RecursionError) as exc:
        return documents, exc
    return documents, None


def scalar(node) -> Optional[str]:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def line(node) -> int:
    return node.start_mark.line + 1
