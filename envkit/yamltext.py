"""Parse YAML (or JSON) text safely, with the C loader where PyYAML has one. Errors say where the problem is.

Every file envkit reads as YAML or JSON (manifests and tables, machine profiles, the site file, the config, lock
files) goes through :func:`parse_yaml`, so all of them follow the same two rules beyond YAML's own:

- a key given twice in one mapping is an error (YAML loaders keep the last value silently, so an admin's second
  ``python:`` or ``cuda_driver:`` would win unseen); merge keys (``<<: *base``) followed by an override are fine;
- a number remembers how it was written (:class:`YamlFloat`), so that the error for an unquoted version can quote
  what the user wrote: YAML reads ``12.10`` as the number 12.1 (see :func:`quote_it`).
"""

from __future__ import annotations

from typing import Any, Optional, Union

_MERGE = "tag:yaml.org,2002:merge"


class YamlFloat(float):
    """A float read from YAML that keeps its text as written ("12.10", which YAML reads as 12.1). ``str()`` (and an
    f-string) give that text, so an error quotes what the user wrote; ``repr()``, JSON and arithmetic see the
    float. Pickles with its text (envkit.filecache keeps parsed files). yaml.safe_dump does not know it: what envkit
    writes as YAML (the site file, locks) is built from its models, never from parsed values."""

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


def quote_it(value: Union[int, float]) -> str:
    """The problem with a version that YAML read as a number, in a form fit to show a user:
    '12.10 must be quoted ("12.10"): YAML reads 12.10 as the number 12.1'. (Double quotes: YAML and JSON both.)"""
    written = str(value)  # a YamlFloat's text as written
    read = repr(float(value)) if isinstance(value, float) else str(int(value))
    if written != read:
        return f'{written} must be quoted ("{written}"): YAML reads {written} as the number {read}'
    return f'{written} must be quoted ("{written}"): unquoted, YAML reads it as a number (and 12.10 as 12.1)'


def parse_yaml(text: str) -> Any:
    """The data in ``text``; ValueError("<problem> at line L, column C") when it is not valid YAML, and
    ValueError("duplicate key 'python' at line L (first at line K)") for a key given twice in one mapping."""
    import yaml  # lazy: commands that read no file do not pay for it

    try:
        return yaml.load(text, Loader=_loader())
    except _DuplicateKey as exc:
        raise ValueError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{at}") from None


class _DuplicateKey(Exception):
    """A key given twice in one mapping: "duplicate key 'python' at line 11 (first at line 9)"."""


_LOADER: Optional[type] = None


def _loader() -> type:
    """PyYAML's safe loader (the C one where there is one), refusing duplicate keys and keeping floats' text."""
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

        def flatten_mapping(self: Any, node: Any) -> None:
            # Every mapping is flattened (its merge keys expanded) before it is constructed, and a mapping merged
            # into another is flattened then, perhaps before its own turn: check the keys as written, first.
            checked = self.__dict__.setdefault("_envkit_checked", set())
            if node not in checked:
                checked.add(node)
                _check_keys(self, node)
            base.flatten_mapping(self, node)

        def construct_float(self: Any, node: Any) -> YamlFloat:
            return YamlFloat(base.construct_yaml_float(self, node), str(node.value))

        _LOADER = type("EnvkitSafeLoader", (base,), {"flatten_mapping": flatten_mapping})
        _LOADER.add_constructor("tag:yaml.org,2002:float", construct_float)
    return _LOADER


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
