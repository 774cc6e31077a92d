"""Parse YAML (or JSON) text safely, with the C loader where PyYAML has one. Errors say where the problem is.

Every file envkit reads as YAML or JSON (manifests and tables, machine profiles, the site file, the config, lock
files) goes through :func:`parse_yaml`, so all of them follow the same rules beyond YAML's own:

- a key given twice in one mapping is an error (YAML loaders keep the last value silently, so an admin's second
  ``python:`` or ``cuda_driver:`` would win unseen); merge keys (``<<: *base``) followed by an override are fine;
- a number is written in plain decimal: PyYAML reads YAML 1.1, where ``010`` is the octal number 8, ``1_000`` is
  1000 and ``1:30`` is 90 (base 60), while JSON and YAML 1.2 read them otherwise or not at all; such a number, and a
  hexadecimal or binary one, is an error naming its line rather than a value nobody meant (a field that takes text
  would take "8" for ``010``);
- a number remembers how it was written (:class:`YamlFloat`), so that the error for an unquoted version can quote
  what the user wrote: YAML reads ``12.10`` as the number 12.1 (see :func:`envkit.versions.quote_it`).
"""

from __future__ import annotations

from typing import Any, Optional

from envkit.versions import is_ascii_number

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


def parse_yaml(text: str) -> Any:
    """The data in ``text``; ValueError("<problem> at line L, column C") when it is not valid YAML,
    ValueError("duplicate key 'python' at line L (first at line K)") for a key given twice in one mapping, and
    ValueError("the number 010 at line L, column C: YAML reads it as the octal number 8; ...") for a number that
    is not written in plain decimal."""
    import yaml  # lazy: commands that read no file do not pay for it

    try:
        return yaml.load(text, Loader=_loader())
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "syntax error"
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{problem}{at}") from None


class _Refused(Exception):
    """What envkit's rules refuse in YAML that PyYAML accepts: its message says what and where."""


class _DuplicateKey(_Refused):
    """A key given twice in one mapping: "duplicate key 'python' at line 11 (first at line 9)"."""


_LOADER: Optional[type] = None


def _loader() -> type:
    """PyYAML's safe loader (the C one where there is one), refusing duplicate keys and numbers not written in plain
    decimal, and keeping floats' text."""
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

        _LOADER = type("EnvkitSafeLoader", (base,), {"flatten_mapping": flatten_mapping})
        _LOADER.add_constructor("tag:yaml.org,2002:float", construct_float)
        _LOADER.add_constructor("tag:yaml.org,2002:int", construct_int)
    return _LOADER


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
