"""The all-reduce across nodes (``envkit verify --nodes N``): run this node's rank of it with the environment's own
Python, and diagnose what went wrong, across the nodes' results.

Each node of the job runs :func:`run_rank` (the probe program in ``--cross-node-worker`` mode); the login node gets
every node's result and :func:`diagnose` turns them into causes with next steps: a rendezvous that timed out (which
address, port and interface were used, and the variables that change them), a port taken, a node that never joined,
nodes whose builds or drivers differ, and NCCL's error strings with their meaning.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from envkit.errors import BadInputError
from envkit.probe.runner import check_framework, probe_scratch
from envkit.probe.zipapp import probe_program
from envkit.state.userdirs import user_dirs
from envkit.system.process import run_captured

CROSS_NODE_BYTES = 16 * 2 ** 20  # what each node contributes to the timed all-reduce
CROSS_NODE_ITERATIONS = 5
WORKER_GRACE = 30.0  # seconds on top of the rendezvous limit for the worker to import the framework and finish
_WAITING = re.compile(r"^envkit-cross-node: rendezvous \S+ from (?P<local>\S+) on (?P<interface>\S+)$", re.MULTILINE)
_PHASE = re.compile(r"^envkit-cross-node: ((?:rendezvous|all_reduce|pairs)\b.*)$", re.MULTILINE)
_FATAL = re.compile(r"^F[0-9]{4} [^\]]*\] (?P<message>.*)$")
# Passed to the worker besides the probe's own: what picks the rendezvous and the network.
_NETWORK_VARIABLES = ("MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "SLURM_PROCID",
                      "SLURM_LOCALID", "SLURMD_NODENAME", "TORCH_DISTRIBUTED_DEBUG", "TF_CPP_MIN_LOG_LEVEL")

# NCCL's error strings (ncclGetErrorString, and its "remote process exited" report) and what they mean.
NCCL_ERRORS = (
    ("unhandled system error", "a system call or the network failed under NCCL (often the wrong network interface, "
     "or InfiniBand not usable)", "Rerun with NCCL_DEBUG=INFO to see the interface NCCL picked, and set "
     "NCCL_SOCKET_IFNAME to the nodes' fast network (ib0, eth0); NCCL_IB_DISABLE=1 tells whether InfiniBand is at "
     "fault."),
    ("unhandled cuda error", "a CUDA call inside NCCL failed (the driver, a GPU in a bad state, or peer-to-peer "
     "transfers)", "Check each node alone first (`envkit verify ENV --partition P:NODE --multi-gpu`); "
     "NCCL_P2P_DISABLE=1 tells whether peer-to-peer transfers are at fault."),
    ("remote process exited or there was a network error", "another node's process died, or the network between "
     "the nodes dropped", "Look at the other nodes' reports above; NCCL_DEBUG=INFO shows which connection failed."),
    ("internal error", "NCCL hit an internal error (often versions of NCCL that differ between the nodes)",
     "Use the same environment, with the same NCCL, on every node."),
    ("invalid usage", "NCCL was called in a way it refuses (a mismatch between the ranks)",
     "Make sure every node runs the same build of the framework."),
)
_TIMEOUT = re.compile(r"time(?:d)? ?out|deadline", re.IGNORECASE)  # gRPC's (JAX, TensorFlow): DEADLINE_EXCEEDED
_IN_USE = re.compile(r"address already in use|EADDRINUSE|errno: ?98", re.IGNORECASE)
_REFUSED = re.compile(r"connection refused|ECONNREFUSED|errno: ?111|failed to connect", re.IGNORECASE)
# How to see more of a failed all-reduce, per framework (the variables reach the worker: _NETWORK_VARIABLES).
_MORE = {"torch": "Rerun with NCCL_DEBUG=INFO (NCCL) or TORCH_DISTRIBUTED_DEBUG=DETAIL to see where.",
         "jax": "Rerun with NCCL_DEBUG=INFO (NCCL, on GPUs) and TF_CPP_MIN_LOG_LEVEL=0 (JAX's own log) to see where.",
         "tensorflow": "Rerun with NCCL_DEBUG=INFO (NCCL, on GPUs) and TF_CPP_MIN_LOG_LEVEL=0 (TensorFlow's own log) "
                       "to see where."}


def run_rank(python: Path, framework: str, rank: int, world: int, addresses: Sequence[str], port: int,
             timeout: float, environ: Mapping[str, str], cache_dir: Optional[Path] = None) -> dict[str, Any]:
    """This node's rank of the all-reduce with ``framework`` (auto: the environment's first), the worker's result,
    or one that says why there is none. ``addresses``: every node's, the rendezvous (the first node's) first."""
    check_framework(framework)
    address = addresses[0]
    if any(not part or "," in part for part in addresses):
        raise BadInputError(f"the nodes' addresses {', '.join(map(repr, addresses))} are not one address each")
    kept = {key: environ[key] for key in _NETWORK_VARIABLES if key in environ}
    with probe_program(cache_dir if cache_dir is not None else user_dirs(os.environ).cache) as program, \
            probe_scratch(environ) as env:
        argv = [str(python), "-I", str(program), "--cross-node-worker", framework, str(rank), str(world),
                ",".join(addresses), str(port), f"{timeout:g}", str(CROSS_NODE_BYTES), str(CROSS_NODE_ITERATIONS)]
        try:
            done = run_captured(argv, {**env, **kept}, timeout + WORKER_GRACE)
        except OSError as exc:
            return _no_result(rank, world, address, port, timeout, "NotStarted",
                              f"{python} could not be started: {exc.strerror or exc}", "")
    if done.returncode is not None:
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        try:
            result = json.loads(lines[-1])
            if isinstance(result, dict):
                return result
        except (ValueError, IndexError):
            pass
    if done.returncode is None:
        result = _no_result(rank, world, address, port, timeout, "Timeout",
                            f"the worker did not finish within {timeout + WORKER_GRACE:g} s", done.stderr)
    else:  # it died without its result (JAX ends the process when its coordinator does not answer)
        how = (f"was ended by signal {-done.returncode}" if done.returncode < 0 else
               f"exited with status {done.returncode}")
        result = _no_result(rank, world, address, port, timeout, "NoReport", f"{python} {how} and printed no "
                            f"result: {_last_words(done.stderr)}", done.stderr)
    phases = _PHASE.findall(done.stderr)
    if phases:  # how far it got: a rendezvous that hung (a port that answers and never talks back), an all-reduce
        result["phase"] = result["error"]["where"] = phases[-1].split()[0]
        waiting = _WAITING.findall(done.stderr)
        if waiting:
            local, interface = waiting[-1]
            result.update(local_address=None if local == "None" else local,
                          interface=None if interface == "None" else interface)
    return result


def _last_words(stderr: str) -> str:
    """What a worker that died said last: a fatal line of the framework's C++ log (glog's ``F1128 ...] message``,
    and the line after it), else its last two lines."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for position in range(len(lines) - 1, -1, -1):
        fatal = _FATAL.match(lines[position])
        if fatal:
            after = lines[position + 1:position + 2]
            return " ".join([fatal.group("message"), *[line for line in after if not line.startswith(("@", "*"))]])
    return " ".join(lines[-2:])


def _no_result(rank, world, address, port, timeout, kind: str, message: str, stderr: str) -> dict[str, Any]:
    return {"rank": rank, "world_size": world, "address": address, "port": port, "timeout": timeout,
            "framework": None, "method": None, "backend": None, "phase": "start", "ok": False, "skipped": None,
            "correct": None, "seconds_per_op": None, "local_address": None, "interface": None,
            "error": {"where": "start", "type": kind, "message": message, "traceback": stderr[-2000:]}}


def bandwidth(results: Sequence[Mapping[str, Any]]) -> tuple[Optional[float], Optional[float]]:
    """(algbw, busbw) in GB/s, as nccl-tests reports them, from the slowest rank; (None, None) when not timed."""
    times = [r.get("seconds_per_op") for r in results]
    if not times or not all(isinstance(t, (int, float)) and t > 0 for t in times):
        return None, None
    world = len(results)
    nbytes = results[0].get("bytes") or CROSS_NODE_BYTES
    algbw = nbytes / max(times) / 1e9  # type: ignore[type-var]
    return round(algbw, 3), round(algbw * 2.0 * (world - 1) / world, 3)


SLOW_PAIR = 0.5  # a pair below this share of the median pair's bandwidth is slow


def pair_bandwidths(names: Sequence[str], results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each pair of nodes with its bandwidth in GB/s (for two nodes the bus bandwidth is the algorithm bandwidth),
    from the slower of its two ranks, and whether it is slow (below :data:`SLOW_PAIR` of the median pair's)."""
    seconds: dict[str, float] = {}
    for result in results:
        for pair, value in (result.get("pairs") or {}).items():
            if isinstance(value, (int, float)) and value > 0:
                seconds[pair] = max(seconds.get(pair, 0.0), value)
    pairs = []
    for pair, value in sorted(seconds.items(), key=lambda item: [int(part) for part in item[0].split("-")]):
        first, second = (int(part) for part in pair.split("-"))
        if max(first, second) >= len(names):
            continue
        nbytes = next((r.get("pair_bytes") for r in results if r.get("pair_bytes")), 4 * 2 ** 20)
        pairs.append({"nodes": [names[first], names[second]], "busbw_gbs": round(nbytes / value / 1e9, 3)})
    if pairs:
        median = sorted(p["busbw_gbs"] for p in pairs)[len(pairs) // 2]
        for pair in pairs:
            pair["slow"] = pair["busbw_gbs"] < SLOW_PAIR * median
    return pairs


def diagnose(nodes: Sequence[Mapping[str, Any]],
             results: Sequence[Optional[Mapping[str, Any]]]) -> list[dict[str, str]]:
    """The causes of a cross-node check that failed, each ``{"rule", "cause", "advice"}``. ``nodes``: each node's
    summary (``node``, ``ok``); ``results``: each rank's all-reduce result (None for a node whose envkit gave none)."""
    found: list[dict[str, str]] = []
    missing = [n["node"] for n, r in zip(nodes, results) if r is None or (r.get("error") or {}).get("where") == "start"]
    if missing:
        found.append({"rule": "node-did-not-join", "cause": f"{', '.join(missing)} did not take part in the "
                      "all-reduce (its check could not start the framework there)",
                      "advice": "See that node's report: the environment must work on every node (the same path, "
                      "on a file system every node mounts)."})
    for node, result in zip(nodes, results):
        if result is None or result.get("ok") or result.get("skipped") or (
                missing and result.get("phase") == "rendezvous"):
            continue  # (the nodes that waited at the rendezvous for one that never came: that one is the cause)
        error = result.get("error") or {}
        text = f"{error.get('type', '')}: {error.get('message', '')}"
        if error.get("where") == "start":
            continue
        found += _network_causes(node["node"], result, text)
    unique: list[dict[str, str]] = []
    for item in found:
        if item not in unique:
            unique.append(item)
    return unique


def differences(nodes: Sequence[Mapping[str, Any]], pairs: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, str]]:
    """What differs between the nodes where it should not (the build, the NVIDIA driver, the speed of a pair's link),
    each ``{"rule", "cause", "advice"}``: said even when the check passes, since the next job may get other nodes."""
    notes: list[dict[str, str]] = []
    slow = [p for p in pairs if p.get("slow")]
    if slow:
        median = sorted(p["busbw_gbs"] for p in pairs)[len(pairs) // 2]
        notes.append({"rule": "slow-pair", "cause": "the link between " + "; ".join(
            f"{' and '.join(p['nodes'])} ({p['busbw_gbs']:g} GB/s)" for p in slow) + f" is slow: the median pair "
            f"carries {median:g} GB/s", "advice": "Check that network path: NCCL_DEBUG=INFO shows the interface each "
            "connection uses (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME pick it)."})
    builds = {(n.get("version"), n.get("cuda")) for n in nodes if n.get("version")}
    if len(builds) > 1:
        notes.append({"rule": "builds-differ", "cause": "the nodes run different builds: " + "; ".join(
            f"{n['node']}: {n.get('version')} (CUDA {n.get('cuda') or 'none'})" for n in nodes if n.get("version")),
            "advice": "Run every node from the same environment (one prefix on a shared file system)."})
    drivers = {n.get("driver") for n in nodes if n.get("driver")}
    if len(drivers) > 1:
        notes.append({"rule": "drivers-differ", "cause": "the nodes' NVIDIA drivers differ: " + "; ".join(
            f"{n['node']}: {n.get('driver')}" for n in nodes if n.get("driver")),
            "advice": "Ask for nodes of one configuration (a partition of identical nodes, or P:NODE,... naming "
            "them); a build must fit the oldest driver."})
    return notes


def _network_causes(node: str, result: Mapping[str, Any], text: str) -> list[dict[str, str]]:
    address, port = result.get("address"), result.get("port")
    route = (f"{node} reached it from {result.get('local_address')} on interface {result.get('interface')}"
             if result.get("local_address") else f"{node} found no route to it")
    for needle, cause, advice in NCCL_ERRORS:
        if needle in text.lower():
            return [{"rule": "nccl-error", "cause": f"on {node}, NCCL said '{needle}': {cause}", "advice": advice}]
    framework = result.get("framework") or "torch"
    if result.get("phase") == "import":
        error = result.get("error") or {}
        return [{"rule": "framework-not-imported", "cause": f"on {node}, the all-reduce could not start "
                 f"{result.get('framework') or 'a framework'}: {error.get('message')}",
                 "advice": "See that node's own check: the environment must import its framework on every node."}]
    if result.get("phase") == "rendezvous":
        if _IN_USE.search(text):
            return [{"rule": "rendezvous-port-taken", "cause": f"the rendezvous port {port} on {address} is taken "
                     f"by another program ({node})", "advice": "Set MASTER_PORT to a free port before running the "
                     "check or the job (envkit derives the port from the job id otherwise)."}]
        if _TIMEOUT.search(text) or _REFUSED.search(text):
            return [{"rule": "rendezvous-timeout", "cause": f"the rendezvous at {address}:{port} (the first node, "
                     f"at the address Slurm has for it) did not complete within {result.get('timeout'):g} s: "
                     f"{route}", "advice": "Every node must reach the first node's address: set MASTER_ADDR to its "
                     "address on a network all nodes share, GLOO_SOCKET_IFNAME (gloo) or NCCL_SOCKET_IFNAME (NCCL) "
                     f"to that network's interface, and check that a firewall lets port {port} through "
                     "(MASTER_PORT sets it)" + (f"; TensorFlow's workers listen on every node's address, node i on "
                                                f"port {port} + i." if framework == "tensorflow" else ".")}]
    if result.get("correct") is False:
        return [{"rule": "wrong-sum", "cause": f"the all-reduce sum is wrong on {node}",
                 "advice": "Check each node alone (`envkit verify ENV --partition P:NODE --multi-gpu`)."}]
    error = result.get("error") or {}
    return [{"rule": "all-reduce-failed", "cause": f"the all-reduce failed on {node}: {error.get('message')}",
             "advice": _MORE.get(framework, _MORE["torch"])}]
