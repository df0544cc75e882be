"""YAML or JSON spec text to a document, safely, with the line of every field.

YAML has anchors and aliases: ten lines of ``&a [*b, *b, ...]`` expand to billions of nodes (an
"alias bomb"), and ``a: &a [*a]`` to a list that holds itself. The text is composed into YAML's
node graph first (aliases there are shared nodes, so it stays small), checked for cycles and for
the size it would expand to, and only then turned into Python values. The line map lets the
dashboard show each 422 next to the field it names; the SDK and CLI read spec files through here.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from foldwise.limits import MAX_DEPTH

MAX_NODES = 20_000
"""Values a document may expand to, aliases included (a 100-parameter spec has ~1,500)."""


class Loader(yaml.SafeLoader):
    """PyYAML's pure-Python safe loader (on deep nesting it raises RecursionError, where
    libyaml's C parser overflows the C stack and takes the process down), reading numbers and
    booleans as YAML 1.2 and JSON do (below): YAML 1.1 reads ``1e-4`` as text unless written
    ``1.0e-4``, and ``1:20`` as 80.

    It stops composing past ``MAX_NODES`` nodes, so a document of a huge list is refused
    before composing it costs seconds of CPU."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0

    def fetch_flow_collection_start(self, token_class: type) -> None:
        """Refuse ``[`` or ``{`` past ``MAX_DEPTH`` levels as it is read: the scanner's work
        for every token grows with the flow level (3 kB of ``[`` took a second of CPU before
        the composer's recursion gave up)."""
        if self.flow_level >= MAX_DEPTH:
            line = self.get_mark().line + 1
            message = f"cannot parse {self.name}: it is nested more than {MAX_DEPTH} levels deep"
            raise SpecTextError(message, line)
        super().fetch_flow_collection_start(token_class)  # type: ignore[misc]

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        self.composed += 1
        if self.composed > MAX_NODES:
            line = self.peek_event().start_mark.line + 1
            raise SpecTextError(
                f"cannot parse {self.name}: it holds more than {MAX_NODES} values", line
            )
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{kind}" for kind in ("bool", "int", "float"))
Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# Numbers and booleans as YAML 1.2 (and JSON) read them, not YAML 1.1: ``1:20`` is text, not
# 80 (base 60), ``010`` text, not 8, and ``on``, ``off``, ``yes``, ``no`` text, not booleans
# (a categorical's ``choices: [on, off]`` stays two words).
Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
Loader.add_implicit_resolver(
    _INT,
    re.compile(r"^(?:[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[0-1_]+)$"),
    list("-+0123456789"),
)
Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


class SpecTextError(ValueError):
    """The text is not a YAML (or JSON) document foldwise reads; ``line`` is 1-based, when the
    parser knows it. The message reads ``cannot parse <source>: <why>``."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def parse_spec_text(text: str, source: str = "the spec") -> tuple[Any, dict[str, int]]:
    """The document and a map from dotted field path (``space.lr.low``) to its 1-based line.

    Raises ``SpecTextError`` naming ``source`` (a file's path, say) for text that does not
    parse, refers to itself, or would expand past ``MAX_NODES`` values."""
    lines: dict[str, int] = {}
    loader = root = None
    try:
        loader = Loader(text)  # the reader refuses unprintable characters here already
        loader.name = source  # what YAML's marks call the text, else "<unicode string>"
        root = loader.get_single_node()
        if root is None:
            return None, {}
        _check_size(root, source)
        _join_surrogate_pairs(root)
        _check_keys(root, source)
        document = loader.construct_document(root)
        _walk(root, (), lines)
    except SpecTextError:
        raise
    except yaml.reader.ReaderError as exc:
        raise _character_error(exc, text, source) from exc
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from exc
    except RecursionError as exc:
        raise SpecTextError(f"cannot parse {source}: it is nested too deeply") from exc
    except (ValueError, TypeError, AttributeError, KeyError, OverflowError) as exc:
        # a typed scalar YAML cannot build (`2001-13-01`, `!!int x`): its constructors raise
        # these, not YAMLError
        raise _value_error(exc, loader, root, source) from exc
    finally:
        if loader is not None:
            loader.dispose()
    return document, lines


def _syntax_error(exc: yaml.YAMLError, source: str) -> SpecTextError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return SpecTextError(f"cannot parse {source}: not valid YAML or JSON: {problem}")
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return SpecTextError(
        f"cannot parse {source}: not valid YAML or JSON at {where}: {problem}", mark.line + 1
    )


def _value_error(
    exc: Exception, loader: Loader | None, root: Node | None, source: str
) -> SpecTextError:
    """A value YAML parsed but could not build, named by its line, text and type."""
    if loader is not None and root is not None:
        for node in _scalars(root):
            loader.constructed_objects, loader.recursive_objects = {}, {}  # the failed run's
            try:
                loader.construct_object(node)
            except Exception as failed:
                kind = str(node.tag).rsplit(":", 1)[-1]
                text = str(node.value) if len(str(node.value)) <= 40 else f"{node.value[:40]}..."
                return SpecTextError(
                    f"cannot parse {source}: line {node.start_mark.line + 1}: "
                    f"{text!r} is not a valid {kind} ({failed}); quote it to keep it as text",
                    node.start_mark.line + 1,
                )
    return SpecTextError(f"cannot parse {source}: a value cannot be read: {exc}")


def _scalars(root: Node) -> list[Node]:
    """Every scalar node of the graph, in document order (each shared node once)."""
    return [node for node in _nodes(root) if not isinstance(node, MappingNode | SequenceNode)]


def _character_error(exc: yaml.reader.ReaderError, text: str, source: str) -> SpecTextError:
    """An unprintable character, placed by line and column (PyYAML gives only its offset in
    the text, under the name ``<unicode string>``)."""
    line = text.count("\n", 0, exc.position) + 1
    column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
    return SpecTextError(
        f"cannot parse {source}: not valid YAML or JSON at line {line}, column {column}: "
        f"unacceptable character #x{exc.character:04x}: {exc.reason}",
        line,
    )


def _check_size(root: Node, source: str) -> None:
    """Refuse a node graph with a cycle or one that expands past ``MAX_NODES`` values."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_NODES:
                raise SpecTextError(
                    f"cannot parse {source}: it expands to more than {MAX_NODES} values "
                    "(anchors and aliases repeat what they name)",
                    node.start_mark.line + 1,
                )
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise SpecTextError(
                f"cannot parse {source}: an alias refers to a value that contains it",
                node.start_mark.line + 1,
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_surrogate_pairs(root: Node) -> None:
    """Read each ``"\\ud83c\\udf89"`` as the one character it encodes, as JSON does (it is
    what ``json.dumps`` writes for an emoji): YAML's reader leaves two lone surrogates. A
    surrogate without its pair stays, and is refused where the spec is checked."""
    for node in _nodes(root):
        if isinstance(node, ScalarNode) and _SURROGATE.search(node.value):
            utf16 = node.value.encode("utf-16-le", "surrogatepass")
            node.value = utf16.decode("utf-16-le", "surrogatepass")


_TEXT = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"


def _check_keys(root: Node, source: str) -> None:
    """Refuse a mapping that gives a key twice: YAML forbids it and PyYAML would keep the last
    silently (a key given again over a ``<<`` merge is an override, and allowed); and a key
    that is not text (``1:``, ``true:``, ``~:``), which JSON cannot carry: it became the text
    Python writes for it (``None``), and ``1`` and ``"1"`` two copies of one key."""
    for node in _nodes(root):
        if not isinstance(node, MappingNode):
            continue
        seen: set[str] = set()
        merged = False
        for key, _value in node.value:
            if isinstance(key, ScalarNode) and key.tag == _MERGE:
                if merged:  # PyYAML kept the first silently
                    raise SpecTextError(
                        f"cannot parse {source}: line {key.start_mark.line + 1}: the merge key "
                        "<< is given twice: merge several mappings with << [*a, *b]",
                        key.start_mark.line + 1,
                    )
                merged = True
                continue
            if not isinstance(key, ScalarNode) or key.tag != _TEXT:
                what = f"the key {key.value[:40]}" if isinstance(key, ScalarNode) else "a key"
                raise SpecTextError(
                    f"cannot parse {source}: line {key.start_mark.line + 1}: {what} is not "
                    "text (a number, true, false, null, a list or a mapping): quote it",
                    key.start_mark.line + 1,
                )
            if key.value in seen:
                raise SpecTextError(
                    f"cannot parse {source}: line {key.start_mark.line + 1}: "
                    f"the key {key.value[:40]!r} is given twice",
                    key.start_mark.line + 1,
                )
            seen.add(key.value)


def _nodes(root: Node) -> list[Node]:
    """Every node of the graph, in document order (each shared node once)."""
    found, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            found.append(node)
            stack.extend(reversed(_children(node)))
    return found


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


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
