"""The local Slurm cluster the Slurm bench scripts run on (multinode_verify.py, survey_speed.py, jupyter_url.py): the
tests' real cluster on localhost (tests/support/slurm_cluster.py), each node with the stand-in NVML answering as that
many A100s, and the environment envkit runs with against it, everything under one temporary directory.

Imported after bench_venv.run_in_venv() and with tests/ on sys.path: it runs in the bench venv.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from support import fake_nvml
from support.slurm_cluster import Node, SlurmCluster, missing_programs

A100 = ("NVIDIA A100-SXM4-40GB", (8, 0), 40960)
DRIVER, CUDA = "535.129.03", 12020  # what each node's stand-in NVML says: driver 535, CUDA 12.2


@contextlib.contextmanager
def a100_cluster(root: Path, nodes: Sequence[Node], partitions: Mapping[str, tuple[str, ...]]
                 ) -> Iterator[tuple[SlurmCluster, dict[str, str]]]:
    """The cluster of ``nodes`` (each with ``node.gpus`` A100s) started under ``root``: (it, envkit's environment
    with its own HOME, XDG directories and site file under ``root``). Its jobs cancelled and it stopped afterwards.
    SystemExit with the reason where Slurm is not installed."""
    missing = missing_programs()
    if missing:
        raise SystemExit(f"Slurm is not installed here (missing: {', '.join(missing)})")
    lib = fake_nvml.build_library(root / "lib")
    for node in nodes:
        fake_nvml.write_node(root / "nodes", node.name, DRIVER, CUDA, [A100] * node.gpus)
    cluster = SlurmCluster(root / "cluster", nodes=tuple(nodes), partitions=dict(partitions))
    try:
        cluster.start()
        env = cluster.env()
        env.update(LD_LIBRARY_PATH=str(lib.parent), FAKE_NVML_DIR=str(root / "nodes"), HOME=str(root / "home"),
                   ENVKIT_SITE=str(root / "site.yaml"), XDG_CONFIG_HOME=str(root / "config"),
                   XDG_CACHE_HOME=str(root / "cache"), XDG_DATA_HOME=str(root / "data"))
        yield cluster, env
    finally:
        cluster.cancel_all()
        cluster.stop()
