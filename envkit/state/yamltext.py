"""Parse YAML (or JSON) text safely, with the C loader where PyYAML has one. Errors say where the problem is.

Every file envkit reads as YAML or JSON (manifests and tables, machine profiles, the site file, the config, lock
files) goes through :func:`parse_yaml`, so all of them follow the same rules beyond YAML's own:

- a key given twice in one mapping is an error (YAML loaders keep the last value silently, so an admin's second
  ``python:`` or ``cuda_driver:`` would win unseen); merge keys (``<<: *base``) followed by an override are fine;
- merge keys follow the YAML merge rule (https://yaml.org/type/merge.html) as envkit implements it here, not as the
  installed PyYAML does: a key written in the mapping wins over every merged one, and among merged mappings the
  first listed wins. PyYAML 6.0.4 changed its own ``flatten_mapping`` so that a mapping merging a mapping that had
  itself merged read the overridden value (``y.k`` of ``a: {x: &x {<<: {k: 1}, k: 2}}``, ``y: {<<: *x}`` was 1):
  owning the rule makes every release read the same;
- aliases are bounded: a document whose aliases would expand to more than :data:`MAX_EXPANDED_NODES` nodes (an
  "alias bomb", a few lines that expand to billions), an alias that refers to the mapping or sequence it is in, and
  nesting deeper than :data:`MAX_DEPTH` are errors, found before anything is built;
- a number is written in plain decimal: PyYAML reads YAML 1.1, where ``010`` is the octal number 8, ``1_000`` is
  1000 and ``1:30`` is 90 (base 60), while JSON and YAML 1.2 read them otherwise or not at all; such a number, and a
  hexadecimal or binary one, is an error naming its line rather than a value nobody meant (a field that takes text
  would take "8" for ``010``);
- a number remembers how it was written (:class:`YamlFloat`), so that the error for an unquoted version can quote
  what the user wrote: YAML reads ``12.10`` as the number 12.1 (see :func:`envkit.versions.quote_it`).
"""

from __future__ import annotations

import re
from typing import Any

from envkit.versions import is_ascii_number

_MERGE = "tag:yaml.org,2002:merge"
MAX_EXPANDED_NODES = 1_000_000  # the largest real lock seen (clay-model's, 185 kB) has about 60,000 nodes
MAX_DEPTH = 200  # envkit's deepest file nests about 8 levels


class YamlFloat(float):
    """A float read from YAML that keeps its text as written ("12.10", which YAML reads as 12.1). ``str()`` (and an
    f-string) give that text, so an error quotes what the user wrote; ``repr()``, JSON and arithmetic see the
    float. Pickles with its text (envkit.state.filecache keeps parsed files). yaml.safe_dump does not know it: what
    envkit writes as YAML (the site file, locks) is built from its models, never from parsed values."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, value: float, text: str) -> YamlFloat:
        self = super().__new__(cls, value)
        self.text = text
        return self

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[type, tuple[float, str]]:
        return YamlFloat, (float(self), self.text)


def parse_yaml(text: str) -> Any:
    """The data in ``text``; ValueError("<problem> at line L, column C") when it is not valid YAML,
    ValueError("duplicate key 'python' at line L (first at line K)") for a key given twice in one mapping, and
    ValueError("the number 010 at line L, column C: YAML reads it as the octal number 8; ...") for a number that
    is not written in plain decimal."""
    import yaml  # lazy: commands that read no file do not pay for it

    try:
        return yaml.load(text, Loader=_loader(native=not _may_nest_deeply(text)))
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:  # the pure-Python parser nests a call per level, before the depth check can see it
        raise ValueError(f"the document nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{at}") from None


class _Refused(Exception):
    """What envkit's rules refuse in YAML that PyYAML accepts: its message says what and where."""


class _DuplicateKey(_Refused):
    """A key given twice in one mapping: "duplicate key 'python' at line 11 (first at line 9)"."""


_LOADERS: dict[bool, type] = {}


def _may_nest_deeply(text: str) -> bool:
    """Whether ``text`` may nest flow collections (``[[[...``) deeper than MAX_DEPTH. libyaml's composer recurses in
    C without a limit before PyYAML 6.0.4 and crashes the process (a segmentation fault near 30,000 levels): such a
    text goes to the pure-Python loader, whose recursion ends in a RecursionError. Brackets inside quotes count too:
    a false alarm costs speed only. (Block nesting needs its indentation written out: 10,000 levels are 50 MB.)"""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = deepest = 0
    for char in re.findall(r"[][{}]", text):
        depth = depth + 1 if char in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    return deepest > MAX_DEPTH


def _loader(native: bool = True) -> type:
    """PyYAML's safe loader (the C one where there is one and ``native``), refusing duplicate keys and numbers not
    written in plain decimal, and keeping floats' text."""
    if native not in _LOADERS:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if native else yaml.SafeLoader

        def flatten_mapping(self: Any, node: Any) -> None:
            _flatten(self, node, self.__dict__.setdefault("_envkit_flattened", set()))

        def construct_document(self: Any, node: Any) -> Any:
            _check_expansion(node)
            return base.construct_document(self, node)

        def construct_float(self: Any, node: Any) -> YamlFloat:
            value = base.construct_yaml_float(self, node)
            if "_" in node.value or ":" in node.value:  # 1_000.5, 1:30.5 (base 60): YAML 1.1's, read as text elsewhere
                raise _unclear_number(node, value)
            return YamlFloat(value, str(node.value))

        def construct_int(self: Any, node: Any) -> int:
            value = base.construct_yaml_int(self, node)
            text = str(node.value)
            digits = text[1:] if text[:1] in ("+", "-") else text
            if not (is_ascii_number(digits) and (digits == "0" or not digits.startswith("0"))):
                raise _unclear_number(node, value)
            return value

        loader = type("EnvkitSafeLoader", (base,), {"flatten_mapping": flatten_mapping,
                                                     "construct_document": construct_document})
        loader.add_constructor("tag:yaml.org,2002:float", construct_float)
        loader.add_constructor("tag:yaml.org,2002:int", construct_int)
        _LOADERS[native] = loader
    return _LOADERS[native]


def _unclear_number(node: Any, value: Any) -> _Refused:
    """The error for a number not written in plain decimal (octal, hexadecimal, binary, with underscores, in base 60):
    "the number 010 at line 3, column 8: YAML reads it as the octal number 8; write numbers in plain decimal digits,
    or quote text ("010")"."""
    text = str(node.value)
    digits = text.lstrip("+-").lower()
    if ":" in text:
        how = "the base-60 number"
    elif digits.startswith("0x"):
        how = "the hexadecimal number"
    elif digits.startswith("0b"):
        how = "the binary number"
    elif digits.startswith("0") and "." not in digits:
        how = "the octal number"
    else:
        how = "the number"
    at = node.start_mark
    return _Refused(f"the number {text} at line {at.line + 1}, column {at.column + 1}: YAML reads it as {how} "
                    f"{value!r}; write numbers in plain decimal digits, or quote text (\"{text}\")")


def _check_keys(constructor: Any, node: Any) -> None:
    """_DuplicateKey for the first key written twice in ``node`` (merge keys are not compared: an override of a
    merged key is what they are for)."""
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE:
            continue
        key = constructor.construct_object(key_node, deep=True)
        try:
            first = seen.setdefault(key, key_node)
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if first is not key_node:
            at, before = key_node.start_mark, first.start_mark
            if at.line == before.line:  # a one-line mapping (JSON, a flow mapping): the columns tell them apart
                raise _DuplicateKey(f"duplicate key {key!r} at line {at.line + 1}, column {at.column + 1} "
                                    f"(first at column {before.column + 1})")
            raise _DuplicateKey(f"duplicate key {key!r} at line {at.line + 1} (first at line {before.line + 1})")


def _check_expansion(root: Any) -> None:
    """_Refused when the document under ``root`` would expand, aliases followed, to more than MAX_EXPANDED_NODES
    nodes, nests deeper than MAX_DEPTH, or holds an alias of a collection inside that collection. Each node is
    counted once (its expanded size kept), so the check is linear in the document as written."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            if sizes[key] > MAX_EXPANDED_NODES:
                raise _Refused(f"the aliases of this document expand to more than {MAX_EXPANDED_NODES:,} nodes "
                               f"(at line {node.start_mark.line + 1}); write the values out, or use fewer aliases")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _Refused(f"the mapping or sequence at line {node.start_mark.line + 1} holds an alias of itself "
                           "(a recursive alias)")
        if depth > MAX_DEPTH:
            raise _Refused(f"the document nests deeper than {MAX_DEPTH} levels (at line {node.start_mark.line + 1})")
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        open_nodes.add(key)
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


def _children(node: Any) -> list[Any]:
    """The nodes directly under a sequence or mapping node (a mapping's keys and values)."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _flatten(constructor: Any, node: Any, flattened: set[int]) -> None:
    """Expand the merge keys of the mapping ``node`` in place, once: its duplicate keys refused as written first,
    then ``node.value`` becomes the merged pairs followed by its own, one pair per key. A key written in the mapping
    wins over a merged one, and an earlier merged mapping (``<<: [*a, *b]``) over a later one; a merged mapping is
    flattened first, so what it overrode is gone before it is merged anywhere."""
    import yaml

    if id(node) in flattened:
        return
    flattened.add(id(node))
    _check_keys(constructor, node)
    own: list[tuple[Any, Any]] = []
    sources: list[Any] = []
    for key_node, value_node in node.value:
        if key_node.tag != _MERGE:
            own.append((key_node, value_node))
            continue
        merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for source in merged:
            if not isinstance(source, yaml.MappingNode):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"expected a mapping or list of mappings for merging, but found {source.id}", source.start_mark)
            _flatten(constructor, source, flattened)
            sources.append(source)
    if not sources:
        return
    taken = {_hashable_key(constructor, key_node) for key_node, _ in own}
    pairs: list[tuple[Any, Any]] = []
    for source in sources:
        for key_node, value_node in source.value:
            key = _hashable_key(constructor, key_node)
            if key not in taken:
                taken.add(key)
                pairs.append((key_node, value_node))
    node.value = pairs + own


def _hashable_key(constructor: Any, key_node: Any) -> Any:
    """The key as YAML reads it, or the node itself where that is unhashable (the mapping's constructor refuses
    such a key with PyYAML's own error)."""
    key = constructor.construct_object(key_node, deep=True)
    try:
        hash(key)
    except TypeError:
        return key_node
    return key
