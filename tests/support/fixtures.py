"""Pytest fixtures over the local package index; import them from a conftest.py to use them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.pypi_index import IndexServer


@pytest.fixture
def pypi_server() -> Iterator[IndexServer]:
    """A started IndexServer with no indexes yet, closed (socket and threads) when the test ends."""
    with IndexServer() as server:
        yield server
