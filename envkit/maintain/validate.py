"""``envkit manifests validate``: every file of a manifests directory checked at once, every problem reported.

The schema is the catalog's own (envkit.catalog.load, in its collecting mode); on top of it come the consistency
checks of envkit.maintain.consistency, which look across builds, manifests and tables. Each problem names its file,
its line where YAML gives one, the build and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from envkit.catalog.model import Manifest, Tables
from envkit.errors import ManifestError
from envkit.maintain.problems import Problem, SourceFile


@dataclass(frozen=True)
class Validation:
    directory: Path
    files: tuple[str, ...]  # every file looked at
    manifests: dict[str, Manifest]  # what parsed (a manifest with problems keeps the builds that parsed)
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "ok": self.ok, "files": list(self.files),
                "builds": sum(len(m.builds) for m in self.manifests.values()),
                "problems": [p.to_dict() for p in self.problems]}


def validate_directory(directory: Path) -> Validation:
    """Every table and manifest of ``directory``, parsed and cross-checked. A missing directory raises
    BadInputError; everything else is a Problem in the result."""
    from envkit.catalog.layout import table_paths
    from envkit.catalog.load import manifest_names

    names = manifest_names(directory)
    problems: list[Problem] = []
    sources: dict[str, SourceFile] = {}
    tables_files = tuple(path.name for path in table_paths(directory))  # rocm.yaml too, where the directory has it
    for file_name in (*tables_files, *(f"{name}.yaml" for name in names)):
        source = _read(directory / file_name, problems)
        if source is not None:
            sources[file_name] = source
    tables = _tables(sources, problems)
    manifests: dict[str, Manifest] = {}
    if tables is not None:
        for name in names:
            source = sources.get(f"{name}.yaml")
            if source is not None:
                manifest = _manifest(name, source, tables, problems)
                if manifest is not None:
                    manifests[name] = manifest
        from envkit.maintain.consistency import check_consistency

        problems += check_consistency(tables, manifests, sources)
    files = tuple(str(directory / f) for f in (*tables_files, *(f"{name}.yaml" for name in names)))
    waiting = () if tables is not None else (Problem(str(directory), None, None, None, "the manifests were not "
                                                     "checked: they are judged against the tables, fix those first"),)
    return Validation(directory=directory, files=files, manifests=manifests,
                      problems=(*_unique(problems), *waiting))  # (the tables' problems first: the cause, then this)


def _read(path: Path, problems: list[Problem]) -> Optional[SourceFile]:
    from envkit.catalog.load import read_text
    from envkit.maintain.yamlmarks import compose, syntax_error_line
    from envkit.state.yamltext import parse_yaml

    try:
        text = read_text(path)  # as the catalog reads it: missing, a link to nothing, a FIFO, ... said plainly
    except ManifestError as error:
        problems.append(Problem(error.path, error.line, None, None, error.problem))
        return None
    try:
        data = parse_yaml(text)  # as the catalog reads it: a key given twice is an error
    except ValueError as error:
        import re

        at = re.findall(r"(?<!first) at line ([0-9]+)", str(error))  # a duplicate key: its message has the line
        line = syntax_error_line(text) or (int(at[0]) if at else None)
        problems.append(Problem(str(path), line, None, None, f"not valid YAML: {error}"))
        return None
    return SourceFile(path=path, data=data, tree=compose(text))


def _tables(sources: dict[str, SourceFile], problems: list[Problem]) -> Optional[Tables]:
    from envkit.catalog.load import CUDA_TABLE, GPU_TABLE, PYTHON_TABLE, ROCM_TABLE
    from envkit.catalog.tables import parse_cuda_table, parse_python_table
    from envkit.machines.gpu_names import parse_gpu_names

    parsed: dict[str, Any] = {}
    for file_name, parse in ((CUDA_TABLE, parse_cuda_table), (PYTHON_TABLE, parse_python_table),
                             (GPU_TABLE, parse_gpu_names)):
        source = sources.get(file_name)
        if source is not None:
            parsed[file_name] = _attempt(source, lambda: parse(source.data, str(source.path)), problems)
    if any(parsed.get(name) is None for name in (CUDA_TABLE, PYTHON_TABLE, GPU_TABLE)):
        return None
    tables = Tables(cuda=parsed[CUDA_TABLE], python=parsed[PYTHON_TABLE], gpu_names=parsed[GPU_TABLE])
    rocm = sources.get(ROCM_TABLE)
    if rocm is None:
        return tables
    from envkit.catalog.rocm_table import parse_rocm_table

    amd = _attempt(rocm, lambda: parse_rocm_table(rocm.data, str(rocm.path)), problems)
    return tables._replace(amd=amd) if amd is not None else None


def _manifest(name: str, source: SourceFile, tables: Tables, problems: list[Problem]) -> Optional[Manifest]:
    from envkit.catalog.schema import parse_manifest

    errors: list[ManifestError] = []
    manifest = _attempt(source, lambda: parse_manifest(source.data, str(source.path), name, tables, errors),
                        problems)
    problems += [problem_from(error, source, name) for error in errors]
    return manifest


def _attempt(source: SourceFile, step: Callable[[], Any], problems: list[Problem]) -> Any:
    try:
        return step()
    except ManifestError as error:
        problems.append(problem_from(error, source, source.path.stem))
        return None


def problem_from(error: ManifestError, source: SourceFile, manifest: str) -> Problem:
    from envkit.maintain.yamlmarks import line_in_build

    line = line_in_build(source.tree, source.data, manifest, error.build, error.field)
    return Problem(error.path, line, error.build, error.field, error.problem)


def _unique(problems: list[Problem]) -> list[Problem]:
    """Each problem once (a release's problem is met by each of its builds), in file and line order."""
    seen = dict.fromkeys(problems)
    return sorted(seen, key=lambda p: (p.file, p.line or 0))
