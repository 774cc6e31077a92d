"""A problem `envkit manifests validate` reports (its file, line, build and field), and a manifest file as read
(its data and its YAML node tree, for line numbers): shared by the schema pass (validate) and the cross-checks
(consistency)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional


@dataclass(frozen=True)
class Problem:
    file: str
    line: Optional[int]
    build: Optional[str]
    field: Optional[str]
    message: str

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        if self.build:
            where += f": build {self.build}"
        if self.field:
            where += f", field {self.field!r}" if self.build else f": field {self.field!r}"
        return f"{where}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "build": self.build, "field": self.field,
                "message": self.message}


@dataclass(frozen=True)
class SourceFile:
    """One file as read: its path, parsed data and YAML node tree (for line numbers)."""

    path: Path
    data: Any
    tree: Any
