"""The probe tests' stand-in frameworks (tests/probe/fakes) as the contents of a wheel: what the tests of `envkit
create` serve from their local index, so that the post-install check imports and runs them (the companions too:
the check imports every companion a build installs, and a wheel without its package would be one that is missing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

FAKES = Path(__file__).resolve().parent.parent / "probe" / "fakes"


def stand_in_files(package: str, config: Optional[Mapping[str, Any]] = None) -> dict[str, str]:
    """The stand-in ``package``'s modules as wheel files ({path in the wheel: text}); with ``config``, also the
    stand-ins' shared module and their switches (fake_config.json: one wheel of an environment carries them)."""
    files = {f"{package}/{source.relative_to(FAKES / package).as_posix()}": source.read_text(encoding="utf-8")
             for source in sorted((FAKES / package).rglob("*.py")) if "__pycache__" not in source.parts}
    if config is not None:
        files["fakearray.py"] = (FAKES / "fakearray.py").read_text(encoding="utf-8")
        files["fake_config.json"] = json.dumps(config)
    return files
