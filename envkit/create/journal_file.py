"""What every journal of a run has and does (`envkit create`'s, envkit.create.journal; `envkit add`'s,
envkit.create.add_journal): written before each change, read back, the installers' process groups in it, and a record
the run changed written back when it is undone."""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

from envkit.errors import EnvkitError
from envkit.state import records
from envkit.state.testpause import fault_at
from envkit.system.process import start_time

_SAVING = threading.Lock()  # a journal is saved from a watcher's thread too: each save writes all set before it


def restore_json(path: Path, data: dict[str, Any], point: str) -> None:
    """Write ``data`` back to ``path`` (a record an undone run had changed), only where it does not hold it already:
    a disk that is full now could not take it again, and need not (``point``: the test-only fault point)."""
    try:
        same = json.loads(path.read_text(encoding="utf-8")) == data
    except (OSError, ValueError):
        same = False
    if not same:
        fault_at(point, path)
        records.write_json_atomic(path, data)


class JournalFile:
    """What every journal of a run has and does: written before each change (``point``: the step, for the test-only
    fault point), read back (one that cannot be read as ``BROKEN`` says: nothing in it can be trusted), and the
    process group of each installer the run starts in it, as it starts."""

    POINT = "journal"  # the fault point of a save that names none
    BROKEN: dict[str, Any] = {"name": "", "prefix": ""}

    def save(self, point: Optional[str] = None) -> None:
        """Write the journal; EnvkitError naming it when the system refuses."""
        with _SAVING:
            data = {k: v for k, v in asdict(self).items() if k != "path"}
            try:
                fault_at(point or self.POINT, self.path)
            except OSError as error:
                raise EnvkitError(f"cannot write {self.path}: {error.strerror}",
                                  hint="envkit keeps its journal there: check that it can write there (permissions, "
                                       "free space and inodes).") from None
            records.write_json_atomic(self.path, data)

    @classmethod
    def load(cls, path: Path):
        """The journal at ``path``; None when there is none."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(path=path, **{k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "path"})
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError):  # unreadable: nothing can be trusted in it
            return cls(path=path, **cls.BROKEN)

    def add_process(self, pgid: int) -> None:
        started = start_time(pgid)
        if started is not None:
            self.processes.append([pgid, started])
            self.save("process")
