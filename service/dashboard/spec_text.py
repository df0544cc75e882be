"""YAML or JSON spec text to a document, with the line of every field for error messages.

The dashboard posts the parsed document to ``POST /studies`` like the SDK does; the line map lets
the page show each 422 error next to the field it names.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode


class SpecTextError(ValueError):
    """The text is not YAML (or JSON); ``line`` is 1-based, when the parser knows it."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def parse_spec_text(text: str) -> tuple[Any, dict[str, int]]:
    """The document and a map from dotted field path (``space.lr.low``) to its 1-based line."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = None if mark is None else mark.line + 1
        raise SpecTextError(f"not valid YAML or JSON: {problem}", line) from exc
    lines: dict[str, int] = {}
    if root is not None:
        _walk(root, (), lines)
    return document, lines


def _walk(node: Node, path: tuple[str, ...], lines: dict[str, int]) -> None:
    if isinstance(node, MappingNode):
        for key, value in node.value:
            child = (*path, str(key.value))
            lines[".".join(child)] = key.start_mark.line + 1
            _walk(value, child, lines)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, str(index))
            lines[".".join(child)] = item.start_mark.line + 1
            _walk(item, child, lines)
