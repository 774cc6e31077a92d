"""A mapping read from a manifests-directory YAML file, with typed getters whose errors name file, build and field.

Used by the schema checks of the tables (envkit.catalog.tables) and the manifests (envkit.catalog.schema).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, NoReturn, Optional, TypeVar

from envkit.errors import ManifestError
from envkit.versions import read_as_number

T = TypeVar("T")


class Node:
    """A mapping from a YAML file, with typed getters whose errors name the file, build and field."""

    def __init__(self, data: Any, path: str, build: Optional[str] = None, prefix: str = "") -> None:
        self.path = path
        self.build = build
        self.prefix = prefix
        if not isinstance(data, Mapping):
            self.fail(f"expected a mapping, got {kind(data)}")
        self.data: Mapping[str, Any] = data

    def fail(self, problem: str, key: Optional[str] = None) -> NoReturn:
        field = f"{self.prefix}{key}" if key else (self.prefix.rstrip(".") or None)
        raise ManifestError(self.path, problem, build=self.build, field=field)

    def only(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for key in self.data:
            if key not in allowed:
                self.fail(f"unknown key; expected one of: {', '.join(sorted(allowed))}", str(key))

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def text(self, key: Any, required: bool = True) -> Optional[str]:
        value = self.data.get(key)
        if value is None:
            if required:
                self.fail("missing", key)
            return None
        self.check_scalar(value, str(key))
        text = str(value).strip()
        if not text:
            self.fail("empty", str(key))
        return text

    def check_scalar(self, value: Any, where: str) -> None:
        if isinstance(value, float):
            # YAML reads 0.10 as the number 0.1 and 560.30 as 560.3: versions must be quoted to mean what they say.
            self.fail(f"quote it ('{value}'): {read_as_number(value)}", where)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(f"expected text, got {kind(value)}", where)

    def parsed(self, key: Any, parse: Callable[[str], T], required: bool = True) -> Optional[T]:
        value = self.text(key, required)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), key)

    def text_list(self, key: str, strings: bool = False) -> tuple[str, ...]:
        """The list's entries as text; with ``strings``, each must be written as text (a package entry that YAML
        reads as a number, ``5``, is a mistake rather than a package named 5)."""
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            self.fail(f"expected a list, got {kind(value)}", key)
        for position, item in enumerate(value):
            self.check_scalar(item, f"{key}[{position}]")
            if strings and not isinstance(item, str):
                self.fail(f"expected text, got the number {item}: quote an entry that is meant as text",
                          f"{key}[{position}]")
            if not str(item).strip():
                self.fail("empty", f"{key}[{position}]")
        return tuple(str(item).strip() for item in value)

    def child(self, key: str, build: Optional[str] = None) -> Node:
        return Node(self.data.get(key), self.path, build or self.build, f"{self.prefix}{key}.")

    def children(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None or value == []:
            self.fail("missing or empty", key)
        if not isinstance(value, list):
            self.fail(f"expected a list, got {kind(value)}", key)
        return value


def kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false"}.get(type(value), type(value).__name__)


