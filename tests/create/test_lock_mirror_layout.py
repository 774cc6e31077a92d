"""A lock keeps upstream URLs only, also where a mirror keeps its files outside the prefix the config maps (issue #39,
item 9): a PyPI mirror's /simple/ pages link to /packages/ab/cd/FILE, which no mapping turns back into an upstream
URL. The lock is refused with the reason (exit 2, nothing written) instead of keeping the mirror's URL; once the
config maps the mirror's files to their upstream too, the lock holds upstream URLs and installs through the mirror.
The tests' real index on 127.0.0.1 is laid out that way."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CU126, PROFILES, Home
from envkit.lockfile.format import read_lock
from support.pypi_index import IndexServer

FILES = "https://files.pythonhosted.org/packages"  # where PyPI keeps its files (the mirror keeps its paths)


@pytest.fixture
def pypi_layout(pypi_server: IndexServer, torch_wheels, home: Home) -> IndexServer:
    pypi_server.add_index("/whl/cu126", torch_wheels["cu126"], files_at="/packages")
    pypi_server.add_index("/pypi/simple", torch_wheels["pypi"], files_at="/packages")
    home.mirror_to(pypi_server)
    return pypi_server


def test_a_lock_never_keeps_the_mirror_s_urls_and_maps_them_once_the_config_says_how(home: Home,
                                                                                    pypi_layout: IndexServer):
    lock = home.root / "torch.conda-lock.yml"
    refused = home.envkit("lock", *CU126, "-o", str(lock))
    assert refused.returncode == 2, refused.stderr
    assert f"the mirror {pypi_layout.url}/whl serves " in refused.stderr, refused.stderr
    assert f"from {pypi_layout.url}/packages/" in refused.stderr and "a lock keeps upstream URLs" in refused.stderr
    assert f'"{FILES}": "{pypi_layout.url}/packages"' in refused.stderr  # the mapping that would do
    assert "Traceback" not in refused.stderr and not lock.exists()
    home.write_config({"https://download.pytorch.org/whl": f"{pypi_layout.url}/whl",
                       "https://pypi.org/simple": f"{pypi_layout.url}/pypi/simple",
                       FILES: f"{pypi_layout.url}/packages"})
    done = home.envkit("lock", *CU126, "-o", str(lock))
    assert done.returncode == 0, done.stderr
    urls = [p.url for p in read_lock(lock).pip()]
    assert len(urls) == 4 and all(url.startswith(f"{FILES}/") for url in urls), urls
    assert pypi_layout.url not in lock.read_text()
    made = home.envkit("create", "--from-lock", str(lock), "--name", "t1", "--machine",
                       str(PROFILES / "rtx4090-cuda126.yaml"), "--yes", "--no-verify")
    assert made.returncode == 0, made.stderr
    assert home.in_env("t1", "import torch; print(torch.__version__)") == "2.13.0+cu126"
    assert any(path.startswith("/packages/") and "torch-2.13.0" in path for path in pypi_layout.fetched_files())
