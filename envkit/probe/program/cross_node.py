"""--nodes: one rank of the all-reduce across nodes (this program in --cross-node-worker mode, one process per node,
started by envkit verify on each node of a Slurm job): a TCP rendezvous at the first node's address, the sum checked,
then its bus bandwidth timed. NCCL on GPUs, gloo on CPU builds. Which local address and interface reach the
rendezvous is recorded: it is the first thing to know when the rendezvous times out."""

import os
import sys
import time

from .collective import MULTI_GPU_CHECK_ELEMENTS, first_wrong
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


def cross_node_worker(rank, world, address, port, timeout, nbytes, iterations):
    """This node's rank of the all-reduce, as a dict (see the keys below); never raises."""
    local, interface = local_route(address)
    out = {"rank": rank, "world_size": world, "address": address, "port": port, "timeout": timeout,
           "local_address": local, "interface": interface, "backend": None, "phase": "import", "ok": False,
           "correct": None, "expected": world * (world + 1) / 2.0, "got": None, "bytes": nbytes,
           "seconds_per_op": None, "pair_bytes": PAIR_BYTES, "pairs": None, "error": None,
           "variables": dict((k, os.environ.get(k)) for k in ("MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME",
                                                              "GLOO_SOCKET_IFNAME"))}
    try:
        import datetime

        import torch
        import torch.distributed as dist

        gpu = bool(torch.cuda.is_available() and dist.is_nccl_available())
        out["backend"] = "nccl" if gpu else "gloo"
        device = "cuda" if gpu else "cpu"
        if gpu:
            torch.cuda.set_device(0)  # the job gives each node's task its GPUs: the first carries the collective
        out["phase"] = "rendezvous"
        # Said before waiting, for a worker cut off while it waits: where it was, and by which route.
        sys.stderr.write("envkit-cross-node: rendezvous %s:%d from %s on %s\n" % (address, port, local, interface))
        sys.stderr.flush()
        started = time.time()
        dist.init_process_group(out["backend"], init_method="tcp://%s:%d" % (address, port), rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=timeout))
        out["rendezvous_seconds"] = round(time.time() - started, 3)
        try:
            out["phase"] = "all_reduce"
            check = torch.full((MULTI_GPU_CHECK_ELEMENTS,), float(rank + 1), device=device)
            dist.all_reduce(check)
            values = check.cpu().tolist()
            wrong = first_wrong(values, out["expected"], MULTI_GPU_CHECK_ELEMENTS)
            out["correct"] = wrong is None
            out["got"] = values[0] if values else None
            if wrong is not None:
                out["error"] = {"where": "all_reduce", "type": "WrongResult", "traceback": "",
                                "message": "the all-reduce sum is wrong on rank %d: every value should be %g, got %r"
                                % (rank, out["expected"], wrong)}
            buffer = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
            dist.all_reduce(buffer)  # warm-up: connections and buffers set up
            dist.barrier()
            started = time.perf_counter()
            for _ in range(iterations):
                dist.all_reduce(buffer)
            if gpu:
                torch.cuda.synchronize()
            out["seconds_per_op"] = (time.perf_counter() - started) / iterations
            out["ok"] = bool(out["correct"])
            if 2 < world <= MAX_PAIR_NODES:
                out["phase"] = "pairs"
                out["pairs"] = _pairs(torch, dist, rank, world, device, gpu)
        finally:
            dist.destroy_process_group()
    except BaseException as exc:  # recorded, never raised, as everywhere in the probe
        out["error"] = error_record(out["phase"], exc)
    return out
