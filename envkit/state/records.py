"""What envkit made: a small record inside each environment (``PREFIX/.envkit/record.json``) and a copy in the
index under the user data dir (``records/NAME.json``), which `envkit envs`, `run`, `remove` and `verify` read.

Records are written atomically (a temporary file, then a rename), so a crash never leaves half a record. Whether
an environment's directory still holds it (the record inside names it) is envkit.state.ownership's.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from envkit.errors import BadInputError, EnvkitError
from envkit.state.files import parse_json, write_atomic
from envkit.state.testpause import fault_at

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SCHEMA = 1
RECORD_DIR = ".envkit"
RECORD_FILE = "record.json"


@dataclass(frozen=True)
class Record:
    name: str
    prefix: str
    kind: str  # "venv" or "conda": how the environment is activated
    backend: str  # conda, rattler or venv
    manifest: str
    build: str  # the build id
    python: str
    created: str  # ISO 8601, UTC
    machine: dict[str, Any]  # the profile it was made for (MachineProfile.to_dict())
    on_target: bool  # whether that profile was this machine's
    installer: Optional[str] = None  # uv or pip, when pip packages were installed
    kernel: Optional[str] = None  # the Jupyter kernelspec name, with --jupyter
    verify: Optional[dict[str, Any]] = None  # the last check: {"ok", "time", "causes", "judged"}
    target: Optional[dict[str, Any]] = None  # what it is for (envkit.machines.target); None: the machine it was made on
    run: Optional[str] = None  # the id of the create run that made it (its journal's)
    manifests: Optional[str] = None  # the manifests directory it was made from (absolute); None: the shipped one
    cuda: Optional[str] = None  # the build's CUDA as its manifest gives it ("12.0"); "none": a CPU build; None: unknown
    held: Optional[list[str]] = None  # the build's packages held exactly (torch==2.13.0+cu126): envkit.backends.held
    additions: Optional[list[str]] = None  # the packages the user added (envkit add, create --with), as asked
    added: Optional[dict[str, str]] = None  # what those installed, name -> version (from the default index)
    on: Optional[dict[str, Any]] = None  # a personal environment: the site environment it stands on (create --on)
    rocm: Optional[str] = None  # a ROCm build's ROCm release as its manifest gives it ("6.4"); None: not one, or unknown
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def target_options(self) -> list[str]:
        """The options that named the machines it is for (``--machine FILE``, ``--partition P``, ...), as its
        target keeps them; none for the machine it was made on (or a damaged target)."""
        options = self.target.get("options") if isinstance(self.target, dict) else None
        if not isinstance(options, list) or not all(isinstance(option, str) for option in options):
            return []
        return list(options)

    def target_partition(self) -> Optional[str]:
        """The ``--partition`` spec (NAME or NAME:NODE,...) among its target's options, if it was named so."""
        options = self.target_options()
        return next((value for flag, value in zip(options[::2], options[1::2]) if flag == "--partition"), None)

    def remake_command(self, *extra: str) -> str:
        """The `envkit create` command that makes it again, where it is, for the machines it is for, from the
        manifests it was made from (``--manifests DIR`` when those were not the shipped ones), shell-quoted.
        (Its --prefix always: whether it was the default one the record does not say, and a default elsewhere would
        make the new one there and, with --force, delete this one.)"""
        import shlex

        python = ["--python", self.python] if re.fullmatch(r"\d+\.\d+", self.python) else []  # not another one
        manifests = ["--manifests", self.manifests] if self.manifests is not None else []
        return shlex.join(["envkit", "create", self.manifest, "--build", self.build, "--name", self.name,
                           "--prefix", self.prefix, *python, *self.target_options(), *manifests, *extra])

    def manifests_gone(self) -> bool:
        """Whether the manifests directory it was made from (not the shipped one) is no longer a directory."""
        return self.manifests is not None and not os.path.isdir(self.manifests)

    def remake_hint(self, *extra: str) -> str:
        """"`COMMAND` makes it again" (:meth:`remake_command`), and, when the manifests directory it was made from is
        gone, that the command needs it back (pasted before that, it fails saying the directory does not exist)."""
        said = f"`{self.remake_command(*extra)}` makes it again"
        if self.manifests_gone():
            said += (f" once {self.manifests} is back (the manifests directory it was made from no longer "
                     "exists)")
        return said


NO_CUDA = "none"  # Record.cuda of a CPU build


def build_cuda(build: Any) -> Optional[str]:
    """What a record keeps of a build's CUDA (envkit.catalog.model.Build): its manifest's ``cuda``, NO_CUDA for a
    CPU build, None for a stand-in (a lock whose build the manifests do not have)."""
    if build.cuda is not None:
        return str(build.cuda)
    return NO_CUDA if build.variant == "cpu" else None


def build_rocm(build: Any) -> Optional[str]:
    """What a record keeps of a ROCm build's ROCm release (its manifest's ``rocm``); None for any other build."""
    return str(build.rocm) if build.rocm is not None else None


def name_for_machine(manifest: str, machine: str) -> str:
    """The name of ``manifest``'s environment for ``machine`` (a fleet's group, named after its first machine):
    MANIFEST-MACHINE with what a name cannot hold made '-' (and '..' one '.'), at most 64 characters."""
    safe = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", machine)).strip("-.") or "group"
    return f"{manifest}-{safe}"[:64]


def is_name(name: str) -> bool:
    """Whether ``name`` can name an environment: a directory name and a conda env name, safe in any shell."""
    return ".." not in name and bool(_NAME.match(name))


def check_name(name: str) -> str:
    """``name`` if it can name an environment (:func:`is_name`); BadInputError (exit 2) saying what can."""
    if not is_name(name):
        raise BadInputError(
            f"{name!r} cannot name an environment",
            hint="Use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or digit), "
                 "no '..', no path separators or shell characters.",
        )
    return name


# Each field of a record and what its value must be (Optional ones may also be null).
_FIELD_TYPES: dict[str, tuple[type, str]] = {
    "name": (str, "text"), "prefix": (str, "text"), "kind": (str, "text"), "backend": (str, "text"),
    "manifest": (str, "text"), "build": (str, "text"), "python": (str, "text"), "created": (str, "text"),
    "machine": (dict, "a mapping"), "on_target": (bool, "true or false"), "installer": (str, "text"),
    "kernel": (str, "text"), "verify": (dict, "a mapping"), "target": (dict, "a mapping"), "run": (str, "text"),
    "manifests": (str, "text"), "cuda": (str, "text"), "rocm": (str, "text"), "schema": (int, "a number"),
    "extra": (dict, "a mapping"), "held": (list, "a list"), "additions": (list, "a list"), "on": (dict, "a mapping"),
    "added": (dict, "a mapping"),
}
_OPTIONAL = ("installer", "kernel", "verify", "target", "run", "manifests", "cuda", "rocm", "held", "additions", "on",
             "added")


def record_from_dict(data: Any, origin: str) -> Record:
    """The record in ``data``; BadInputError naming the fields that are missing or of the wrong kind otherwise."""
    if not isinstance(data, dict):
        raise BadInputError(f"{origin}: not an envkit record (a JSON object was expected)")
    fields = Record.__dataclass_fields__
    missing = [name for name, spec in fields.items() if name not in data and _required(spec)]
    wrong = []
    for name, (kind, words) in _FIELD_TYPES.items():
        value = data.get(name)
        if name not in data or (value is None and name in _OPTIONAL):
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            wrong.append(f"{name} (not {words})")
    problems = ([f"missing fields: {', '.join(missing)}"] if missing else []) + (
        [f"bad fields: {', '.join(wrong)}"] if wrong else [])
    if problems:
        raise BadInputError(f"{origin}: not an envkit record ({'; '.join(problems)})")
    return Record(**{k: data[k] for k in fields if k in data})


def _required(spec: Any) -> bool:
    from dataclasses import MISSING

    return spec.default is MISSING and spec.default_factory is MISSING


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` in one step; EnvkitError naming the file when it cannot be written."""
    try:
        write_atomic(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    except OSError as error:
        where = f" ({error.filename})" if error.filename and str(error.filename) != str(path) else ""
        raise EnvkitError(f"cannot write {path}: {error.strerror or error}{where}",
                          hint="envkit keeps its records there: check that it can write there (permissions, free "
                               "space) and that nothing else is in the way.") from None


def in_prefix(prefix: Path) -> Path:
    return prefix / RECORD_DIR / RECORD_FILE


def index_path(records_dir: Path, name: str) -> Path:
    return records_dir / f"{name}.json"


def save(record: Record, records_dir: Path) -> None:
    """Into the environment first, then the index: an index entry always has its environment's record. For a new
    environment (`envkit create`); a change to one that exists goes through :func:`update`."""
    write_json_atomic(in_prefix(Path(record.prefix)), record.to_dict())
    write_json_atomic(index_path(records_dir, record.name), record.to_dict())


def load(records_dir: Path, name: str) -> Optional[Record]:
    """The record of ``name``, None when there is none; EnvkitError when it cannot be read, BadInputError (exit 2)
    when it is not a record of ``name`` (`envkit remove NAME` forgets it all the same)."""
    path = index_path(records_dir, name)
    hint = _forget_hint(records_dir, name)
    if not _entry_exists(records_dir, name):
        return None
    from envkit.state.files import read_bytes_file

    try:
        text = read_bytes_file(path, "record").decode("utf-8")  # bounded; a FIFO planted there is not waited on
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise BadInputError(f"{path} is not UTF-8 text (envkit writes its records as UTF-8 JSON)", hint=hint) \
            from None
    except ValueError as error:
        raise BadInputError(f"the record {path} {error}", hint=hint) from None
    try:
        data = parse_json(text)
    except ValueError:
        raise BadInputError(f"{path} is not valid JSON", hint=hint) from None
    try:
        record = record_from_dict(data, str(path))
    except BadInputError as error:
        raise BadInputError(error.message, hint=hint) from None
    if record.name != name:
        raise BadInputError(f"{path} is not the record of an environment named {name!r} (it names "
                            f"{record.name!r})", hint=hint)
    if not os.path.isabs(record.prefix):
        raise BadInputError(f"{path}: the environment's directory {record.prefix!r} is not an absolute path",
                            hint=hint)
    if record.manifests is not None and not os.path.isabs(record.manifests):
        raise BadInputError(f"{path}: the manifests directory {record.manifests!r} is not an absolute path", hint=hint)
    _check_names(record, path, hint)
    return record


def _check_names(record: Record, path: Path, hint: str) -> None:
    """BadInputError unless the fields envkit turns into paths are plain names: the manifest (the manifests
    directory's MANIFEST.yaml) and the Jupyter kernel (the kernels directory's KERNEL, which `remove` deletes)."""
    from envkit.state.files import plain_name_problem

    for field_name, value in (("manifest", record.manifest), ("kernel", record.kernel)):
        problem = plain_name_problem(value) if value is not None else None
        if problem is not None:
            raise BadInputError(f"{path}: its {field_name} {value!r} {problem}: it is not a name", hint=hint)


@dataclass(frozen=True)
class Unreadable:
    """An index entry that is not a readable record (truncated, edited, from elsewhere): listed by `envkit envs`,
    forgotten by `envkit remove`."""

    name: str
    reason: str  # the error, in words
    prefix: Optional[str] = None  # what the entry says, when it names an absolute path (not trusted: see remove)
    kernel: Optional[str] = None
    hint: Optional[str] = None  # what to do about it: `envkit remove NAME` forgets it, unless it is not envkit's
    foreign: bool = False  # not a file (a directory named NAME.json): not envkit's, never deleted


def unreadable(records_dir: Path, name: str) -> Optional[Unreadable]:
    """Why the record of ``name`` cannot be read, or None when it can (or there is none). ForeignEntry when what is
    there is not envkit's (a directory named NAME.json): what would act on the entry must not."""
    try:
        load(records_dir, name)
    except ForeignEntry:
        raise
    except EnvkitError as error:
        return _unreadable(records_dir, name, error)
    return None


def _unreadable(records_dir: Path, name: str, error: EnvkitError) -> Unreadable:
    raw = _raw(index_path(records_dir, name))
    prefix, kernel = raw.get("prefix"), raw.get("kernel")
    return Unreadable(name, error.message, prefix if isinstance(prefix, str) and os.path.isabs(prefix) else None,
                      kernel if isinstance(kernel, str) else None, error.hint, isinstance(error, ForeignEntry))


def _raw(path: Path) -> dict[str, Any]:
    if not os.path.isfile(path):
        return {}
    from envkit.state.files import read_text_file

    try:
        data = parse_json(read_text_file(path, "record"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_quietly(records_dir: Path, name: str) -> Optional[Record]:
    """The record, or None when there is none or it cannot be read."""
    try:
        return load(records_dir, name)
    except EnvkitError:
        return None


def load_all(records_dir: Path) -> list[Record]:
    """Every recorded environment, by name; unreadable entries are left out (see scan)."""
    return scan(records_dir)[0]


def scan(records_dir: Path) -> tuple[list[Record], list[Unreadable]]:
    """Every recorded environment, by name, and the index entries that cannot be read, with the reason."""
    found: list[Record] = []
    broken: list[Unreadable] = []
    try:
        names = sorted(p.stem for p in records_dir.glob("*.json"))
    except OSError:
        return [], []
    for name in names:
        try:
            record = load(records_dir, name)
        except EnvkitError as error:
            broken.append(_unreadable(records_dir, name, error))
            continue
        if record is not None:
            found.append(record)
    return found, broken


def _forget_hint(records_dir: Path, name: str) -> str:
    """How an index entry that cannot be read goes: `envkit remove NAME`, for a name envkit could have written."""
    if is_name(name):
        return f"`envkit remove {name} --yes` forgets it."
    return (f"envkit writes no entry of that name (it cannot name an environment), and `envkit remove` takes none: "
            f"move {index_path(records_dir, name)} out of {records_dir} yourself.")


class ForeignEntry(EnvkitError):
    """Something in the index that is not a file (a directory named NAME.json): envkit did not make it."""


def _entry_exists(records_dir: Path, name: str) -> bool:
    """Whether the index has an entry for ``name``; ForeignEntry when what is there is not a file (or a link to
    one): envkit writes only files there, so it neither reads nor deletes that."""
    path = index_path(records_dir, name)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return False
    except OSError as error:
        raise EnvkitError(f"cannot read {path}: {error.strerror or error}",
                          hint=_forget_hint(records_dir, name)) from None
    if stat.S_ISREG(mode):
        return True
    what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
    raise ForeignEntry(f"{path} is {what}, not an envkit record",
                       hint=f"envkit writes only files there, so it did not make this and will not delete it: move "
                            f"it out of {records_dir} yourself.")


def forget(records_dir: Path, name: str) -> None:
    """Delete the index entry of ``name``; ForeignEntry, deleting nothing, when it is not a file envkit wrote (a
    symbolic link goes, whatever it points to: deleting it deletes nothing else)."""
    path = index_path(records_dir, name)
    if not os.path.islink(path) and not _entry_exists(records_dir, name):
        return
    try:
        fault_at("forget", path)
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        raise EnvkitError(f"cannot delete {path}: {error.strerror or error}",
                          hint="Check that you can write there, then run this again.") from None


def with_verify(record: Record, verify: dict[str, Any]) -> Record:
    return replace(record, verify=verify)
