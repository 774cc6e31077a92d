"""Schema checks of the shared tables of a manifests directory: cuda.yaml and python.yaml (gpus.yaml is parsed by
envkit.machines.gpu_names). Pure: data in, frozen tables out, a ManifestError naming file and field otherwise."""

from __future__ import annotations

import re
from typing import Any, Callable

from envkit.catalog.entries import https_url_problem
from envkit.catalog.model import PythonTable
from envkit.catalog.node import Node
from envkit.machines.cuda import CudaTable, FirstDriver, LastDriver
from envkit.versions import ComputeCapability, CudaVersion, DriverVersion


def parse_cuda_table(data: Any, path: str) -> CudaTable:
    node = Node(data, path)
    node.only({"min_driver", "minor_version_compatibility", "min_compute_capability", "last_driver_branch",
               "first_driver_branch"})

    def table(key: str, parse_key: Callable[[str], Any], parse_value: Callable[[str], Any]) -> dict[Any, Any]:
        sub = node.child(key)
        if not sub.data:
            node.fail("missing or empty", key)
        out = {}
        for raw_key in sub.data:
            sub.check_scalar(raw_key, str(raw_key))
            try:
                parsed_key = parse_key(str(raw_key))
            except ValueError as exc:
                sub.fail(str(exc), str(raw_key))
            out[parsed_key] = sub.parsed(raw_key, parse_value)
        return out

    min_driver = table("min_driver", CudaVersion.parse, DriverVersion.parse)
    return CudaTable(
        min_driver=min_driver,
        minor_compat_floor=table("minor_version_compatibility", _major, DriverVersion.parse),
        min_compute_capability=table("min_compute_capability", _major, ComputeCapability.parse),
        last_drivers=_last_drivers(node, min_driver) if node.has("last_driver_branch") else (),
        first_drivers=_first_drivers(node, min_driver) if node.has("first_driver_branch") else (),
    )


def _last_drivers(node: Node, min_driver: dict[CudaVersion, DriverVersion]) -> tuple[LastDriver, ...]:
    """last_driver_branch: the last branch of the GPUs below a compute capability."""
    return tuple(LastDriver(below=entry.parsed("below_compute_capability", ComputeCapability.parse), branch=branch,
                            cuda=cuda, gpus=entry.text("gpus"))
                 for entry, branch, cuda in _branches(node, "last_driver_branch", "below_compute_capability",
                                                      min_driver))


def _first_drivers(node: Node, min_driver: dict[CudaVersion, DriverVersion]) -> tuple[FirstDriver, ...]:
    """first_driver_branch: the first branch of the GPUs of some compute capabilities, each listed once."""
    out: list[FirstDriver] = []
    for entry, branch, cuda in _branches(node, "first_driver_branch", "compute_capabilities", min_driver):
        texts = entry.text_list("compute_capabilities")
        if not texts:
            entry.fail("missing or empty: the compute capabilities of the generation ('12.0')",
                       "compute_capabilities")
        capabilities = []
        for position, text in enumerate(texts):
            try:
                capability = ComputeCapability.parse(text)
            except ValueError as exc:
                entry.fail(str(exc), f"compute_capabilities[{position}]")
            if capability in capabilities or any(capability in first.capabilities for first in out):
                entry.fail(f"{capability} has a first branch already", f"compute_capabilities[{position}]")
            capabilities.append(capability)
        out.append(FirstDriver(capabilities=tuple(capabilities), branch=branch, cuda=cuda, gpus=entry.text("gpus")))
    return tuple(out)


def _branches(node: Node, key: str, gpu_key: str, min_driver: dict[CudaVersion, DriverVersion]
              ) -> list[tuple[Node, int, CudaVersion]]:
    """The entries of a list of driver branches ({gpus, <gpu_key>, branch, cuda}), each with its branch and CUDA.
    Each entry's CUDA must be what cuda.yaml's min_driver says the branch supports at most (its minimum driver in
    the branch or older, the next CUDA's newer than the branch)."""
    raw = node.data[key]
    if not isinstance(raw, list):
        node.fail(f"expected a list of {{gpus, {gpu_key}, branch, cuda}}", key)
    out = []
    for position, item in enumerate(raw):
        entry = Node(item, node.path, prefix=f"{key}[{position}].")
        entry.only({"gpus", gpu_key, "branch", "cuda"})
        branch_text = entry.text("branch")
        if not re.fullmatch(r"R?[0-9]{3}", branch_text):
            entry.fail(f"{branch_text!r} is not a driver branch like 'R580'", "branch")
        branch = int(branch_text.lstrip("R"))
        cuda = entry.parsed("cuda", CudaVersion.parse)
        if cuda not in min_driver:
            entry.fail(f"CUDA {cuda} is not in min_driver", "cuda")
        highest = max((version for version, driver in min_driver.items() if driver.branch <= branch), default=None)
        if highest is None:
            entry.fail(f"R{branch} is older than every driver in min_driver: it supports none of its CUDA", "branch")
        if highest != cuda:
            entry.fail(f"R{branch} supports CUDA {highest} at most by min_driver ({cuda}'s minimum driver is "
                       f"{min_driver[cuda]}): the two tables disagree", "cuda")
        out.append((entry, branch, cuda))
    return out


def _major(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,3}", text):  # (str.isdigit takes any Unicode digit, '１２' and '²' too)
        raise ValueError(f"{text!r} is not a CUDA major version like '12'")
    return int(text)


def parse_python_table(data: Any, path: str) -> PythonTable:
    node = Node(data, path)
    node.only({"versions", "default", "conda_channel", "pypi_index"})
    versions = tuple(sorted(_python_version(node, "versions", text) for text in node.text_list("versions")))
    if not versions:
        node.fail("missing or empty", "versions")
    default = node.parsed("default", lambda text: _python_version(node, "default", text))
    if default not in versions:
        node.fail(f"{default} is not one of the versions listed", "default")
    sources = {key: https_url(node, key) for key in ("conda_channel", "pypi_index")}
    return PythonTable(versions=versions, default=default, **sources)


def https_url(node: Node, key: str) -> str:
    url = node.text(key)
    if not url.startswith("https://"):
        node.fail(f"{url!r}: give the upstream https URL (map it to a mirror in envkit's config)", key)
    problem = https_url_problem(url, "index" if key == "pypi_index" else "channel")
    if problem:
        node.fail(problem, key)
    return url.rstrip("/")


def _python_version(node: Node, key: str, text: str) -> Any:
    from packaging.version import Version

    if not re.fullmatch(r"3\.[0-9]{1,3}", text):
        node.fail(f"{text!r} is not a Python version like '3.12'", key)
    return Version(text)


