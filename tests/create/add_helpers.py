"""What the tests of `envkit add` and of the environment's guard share: the wheels that reproduce the cases (a package
that needs any torch, one that needs another torch, one whose dependency is on the framework's index too under the
same name, one that needs a newer dependency than the build installed, one that breaks the framework's import), the
index that serves them beside the stand-in torch, and a fingerprint of an environment to prove it unchanged."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from conftest import CU126, Home, fake_torch_files, make_home
from support.local_wheels import MissingDistributionError, local_distribution_files
from support.pypi_index import IndexServer
from support.stand_ins import stand_in_files
from support.wheels import build_wheel

# A .pth line that makes `import torch` fail in every Python of the environment, as a broken addition can.
BREAKS_TORCH = "import sys; sys.modules['torch'] = None\n"


def add_wheels(out: Path) -> dict[str, list[Path]]:
    """{"cu126": more of the framework's index, "pypi": the packages users add}."""
    cu126 = [
        build_wheel(out / "cu126", "confusable", "9.0"),  # the same name as a PyPI project: never taken from here
        build_wheel(out / "cu126", "torch", "2.7.0+cu126", requires=["filelock"],
                    files=fake_torch_files("2.7.0+cu126", "12.6")),
        build_wheel(out / "cu126", "torchvision", "0.22.0+cu126", requires=["torch==2.7.0"],
                    files=stand_in_files("torchvision")),  # the check imports and runs every companion
        build_wheel(out / "cu126", "torchaudio", "2.7.0+cu126", requires=["torch==2.7.0"],
                    files=stand_in_files("torchaudio")),
    ]
    pypi = [
        build_wheel(out / "pypi", "anytorch", "1.0", requires=["torch", "confusable"],
                    files={"anytorch/__init__.py": "import torch\nVERSION = torch.__version__\n"}),
        build_wheel(out / "pypi", "confusable", "1.0", files={"confusable.py": "WHERE = 'pypi'\n"}),
        build_wheel(out / "pypi", "oldtorch", "1.0", requires=["torch==2.7.0"]),
        build_wheel(out / "pypi", "newfl", "1.0", requires=["filelock>=3.30"], files={"newfl.py": ""}),
        build_wheel(out / "pypi", "filelock", "3.30.0", files={"filelock.py": "VERSION = '3.30.0'\n"}),
        build_wheel(out / "pypi", "breaktorch", "1.0", requires=["filelock>=3.30"],
                    files={"breaktorch.pth": BREAKS_TORCH}),
        build_wheel(out / "pypi", "small", "1.0", files={"small.py": "ANSWER = 42\n"}),
        build_wheel(out / "pypi", "small", "0.5", files={"small.py": "ANSWER = 5\n"}),
        build_wheel(out / "pypi", "timm", "1.0", requires=["torchvision"]),
        build_wheel(out / "pypi", "needy", "2.0", requires=["torch==2.7.0"]),
        build_wheel(out / "pypi", "needy", "1.0", requires=["torch"]),
    ]
    try:
        pypi += local_distribution_files(["pip"])  # the real pip, for `envkit add ENV pip`
    except MissingDistributionError:
        pass
    return {"cu126": cu126, "pypi": pypi}


def serve(server: IndexServer, torch_wheels: dict[str, list[Path]], extra: dict[str, list[Path]], home: Home) -> None:
    server.add_index("/whl/cu126", [*torch_wheels["cu126"], *extra["cu126"]])
    server.add_index("/pypi/simple", [*torch_wheels["pypi"], *extra["pypi"]])
    home.mirror_to(server)


@contextlib.contextmanager
def lab(tmp_path_factory, torch_wheels, label: str, create: bool = True):
    """(a home of its own, the index serving the stand-in torch and add_wheels' packages to it), with torch-cu126
    made there (``create``), for the tests of a module that share them."""
    home = make_home(tmp_path_factory.mktemp(label) / "home")
    with IndexServer() as server:
        serve(server, torch_wheels, add_wheels(tmp_path_factory.mktemp("add-wheels")), home)
        if create:
            done = home.envkit("create", *CU126, "--yes")
            assert done.returncode == 0, done.stderr
        yield home, server


def fingerprint(prefix: Path) -> dict[str, str]:
    """Every file and link of the environment (bytecode caches aside, and its record, which `envkit verify` writes
    its check into: see record_json), by path: its sha256, or where it points."""
    out = {}
    for directory, dirs, files in os.walk(prefix):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
            path = Path(directory) / name
            relative = str(path.relative_to(prefix))
            if relative == ".envkit/record.json":
                continue
            if path.is_symlink():
                out[relative] = "-> " + os.readlink(path)
            elif path.is_file():
                out[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def torch_files(prefix: Path) -> dict[str, str]:
    """The files of the stand-in torch (its RECORD's), by path, each with its sha256."""
    site = next(prefix.glob("lib/python*/site-packages"))
    dist = next(site.glob("torch-*.dist-info"))
    rows = [line.split(",")[0] for line in (dist / "RECORD").read_text().splitlines() if line]
    return {row: hashlib.sha256((site / row).read_bytes()).hexdigest() for row in rows if (site / row).is_file()}


def installed_versions(prefix: Path) -> dict[str, str]:
    site = next(prefix.glob("lib/python*/site-packages"))
    out = {}
    for dist in site.glob("*.dist-info"):
        fields = dict(line.split(": ", 1) for line in (dist / "METADATA").read_text().splitlines()[:3] if ": " in line)
        out[fields["Name"].lower()] = fields["Version"]
    return out


def record_json(home: Home, name: str) -> str:
    """The record, in the index and inside the environment (the same), without the last check's result."""
    index = home.record(name)
    inside = json.loads((Path(index["prefix"]) / ".envkit" / "record.json").read_text())
    assert inside == index
    return json.dumps({key: value for key, value in index.items() if key != "verify"}, sort_keys=True)
