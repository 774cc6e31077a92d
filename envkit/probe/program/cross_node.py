"""--nodes: one rank of the all-reduce across nodes (this program in --cross-node-worker mode, one process per node,
started by envkit verify on each node of a Slurm job), with the environment's own framework: torch (torch.distributed
all_reduce: NCCL on GPUs, gloo on CPU builds), jax (jax.distributed, then a psum across the processes: NCCL on GPUs,
gloo on CPUs) or tensorflow (MultiWorkerMirroredStrategy's all-reduce over TF_CONFIG: NCCL on GPUs, a gRPC ring on
CPUs). A framework with none (mxnet) gets a result that says what was not checked. Each meets the others at the
first node's address, checks the sum, then times it. Which local address and interface reach the rendezvous is
recorded: it is the first thing to know when the rendezvous times out."""

import os
import time

from .collective import MULTI_GPU_CHECK_ELEMENTS, check_rank_sum, enter_phase
from .cross_node_jax import jax_rank
from .cross_node_tensorflow import tensorflow_rank
from .frameworks import framework_for
from .record import error_record

SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def local_route(address):
    """(the local address this node reaches ``address`` from, the interface that holds it); None for what cannot be
    told. No packet is sent: a UDP socket's connect() only asks the kernel for the route."""
    import socket
    import struct

    local = interface = None
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect((address, 9))
            local = probe.getsockname()[0]
            import fcntl

            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
                except OSError:
                    continue
                if socket.inet_ntoa(packed[20:24]) == local:
                    interface = name
                    break
        finally:
            probe.close()
    except Exception:
        pass
    return local, interface


PAIR_BYTES = 4 * 2 ** 20  # what each node of a pair contributes to the pair's timed all-reduce
PAIR_ITERATIONS = 3
MAX_PAIR_NODES = 16  # past that, the pairs (n (n - 1) / 2 of them) would take longer than the check


def _pairs(torch, dist, rank, world, device, gpu):
    """Seconds per all-reduce of each pair of ranks this rank is in, ``{"I-J": seconds}``: one pair after the other,
    so that a slow link between two nodes shows where the all-reduce of all of them only looks slow."""
    buffer = torch.zeros(PAIR_BYTES // 4, dtype=torch.float32, device=device)
    times = {}
    for first in range(world):
        for second in range(first + 1, world):
            group = dist.new_group([first, second])  # every rank creates every group, in the same order
            if rank not in (first, second):
                continue
            dist.all_reduce(buffer, group=group)
            started = time.perf_counter()
            for _ in range(PAIR_ITERATIONS):
                dist.all_reduce(buffer, group=group)
            if gpu:
                torch.cuda.synchronize()
            times["%d-%d" % (first, second)] = (time.perf_counter() - started) / PAIR_ITERATIONS
    return times


# What a framework without an all-reduce across nodes leaves unchecked (said in the report, never a FAIL).
NO_COLLECTIVE = ("envkit runs no all-reduce across nodes for %s: each node's own check ran; the network between the "
                 "nodes and a collective across them were not checked")


def cross_node_worker(requested, rank, world, addresses, port, timeout, nbytes, iterations):
    """This node's rank of the all-reduce, as a dict (see the keys below); never raises. ``addresses``: every node's
    address, the first node's (the rendezvous) first."""
    address = addresses[0]
    local, interface = local_route(address)
    out = {"rank": rank, "world_size": world, "address": address, "port": port, "timeout": timeout,
           "local_address": local, "interface": interface, "framework": None, "method": None, "backend": None,
           "phase": "import", "ok": False, "skipped": None, "correct": None, "expected": world * (world + 1) / 2.0,
           "got": None, "bytes": nbytes, "iterations": iterations, "seconds_per_op": None, "pair_bytes": PAIR_BYTES,
           "pairs": None, "error": None,
           "variables": dict((k, os.environ.get(k)) for k in ("MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME",
                                                              "GLOO_SOCKET_IFNAME"))}

    try:
        framework, why = framework_for(requested)
        out["framework"] = framework
        if framework is None:
            out["error"] = {"where": "import", "type": "ModuleNotFoundError", "message": why, "traceback": ""}
        elif framework not in RANKS:
            out.update(ok=None, skipped=NO_COLLECTIVE % framework)
        else:
            RANKS[framework](out, addresses)
    except BaseException as exc:  # recorded, never raised, as everywhere in the probe
        out["error"] = error_record(out["phase"], exc)
    return out


def torch_rank(out, addresses):
    import datetime

    import torch
    import torch.distributed as dist

    rank, world, timeout = out["rank"], out["world_size"], out["timeout"]
    gpu = bool(torch.cuda.is_available() and dist.is_nccl_available())
    out.update(method="torch.distributed all_reduce", backend="nccl" if gpu else "gloo")
    device = "cuda" if gpu else "cpu"
    if gpu:
        torch.cuda.set_device(0)  # the job gives each node's task its GPUs: the first carries the collective
    enter_phase(out, "rendezvous")
    started = time.time()
    dist.init_process_group(out["backend"], init_method="tcp://%s:%d" % (out["address"], out["port"]), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout))
    out["rendezvous_seconds"] = round(time.time() - started, 3)
    try:
        enter_phase(out, "all_reduce")
        check = torch.full((MULTI_GPU_CHECK_ELEMENTS,), float(rank + 1), device=device)
        dist.all_reduce(check)
        check_rank_sum(out, check.cpu().tolist())
        buffer = torch.zeros(out["bytes"] // 4, dtype=torch.float32, device=device)
        dist.all_reduce(buffer)  # warm-up: connections and buffers set up
        dist.barrier()
        started = time.perf_counter()
        for _ in range(out["iterations"]):
            dist.all_reduce(buffer)
        if gpu:
            torch.cuda.synchronize()
        out["seconds_per_op"] = (time.perf_counter() - started) / out["iterations"]
        out["ok"] = bool(out["correct"])
        if 2 < world <= MAX_PAIR_NODES:
            enter_phase(out, "pairs")
            out["pairs"] = _pairs(torch, dist, rank, world, device, gpu)
    finally:
        dist.destroy_process_group()


RANKS = {"torch": torch_rank, "jax": jax_rank, "tensorflow": tensorflow_rank}
