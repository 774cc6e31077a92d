"""The probe of PyTorch: its build, its GPUs, the checks on each, its companions (torchvision, torchaudio: imported,
and one operation of each on every device); --bench; --multi-gpu as an NCCL all-reduce with one process per GPU
(this program again, in --nccl-worker mode: nccl_worker)."""

import json
import os
import subprocess
import sys
import tempfile
import time

from .bench import BENCH_N, bench_runs, timed_products
from .checks import CPU_N, GPU_N, conv_inputs, matrix, py_conv2d, py_matmul, run_check
from .companions import check_companions, torch_operations
from .collective import (MULTI_GPU_BYTES, MULTI_GPU_CHECK_ELEMENTS, MULTI_GPU_ITERATIONS, MULTI_GPU_TIMEOUT,
                         collective_result, set_bandwidth, too_few_gpus)
from .record import as_text, clip, error_record

def probe_torch(report, recorder, options):
    import torch

    report["version"] = str(getattr(torch, "__version__", "unknown"))
    version = getattr(torch, "version", None)
    cuda = getattr(version, "cuda", None)
    report["cuda"] = str(cuda) if cuda else None
    # A ROCm build says its HIP in torch.version.hip ("7.2.53211") and has no CUDA; torch.cuda drives its AMD GPUs.
    hip = getattr(version, "hip", None)
    report["hip"] = str(hip) if hip else None
    report["gpu_build"] = bool(cuda or hip)
    report["cudnn"] = recorder.guarded("torch.backends.cudnn.version", lambda: as_text(torch.backends.cudnn.version()))
    available = bool(recorder.guarded("torch.cuda.is_available", torch.cuda.is_available, False))
    report["gpu_available"] = available
    count = recorder.guarded("torch.cuda.device_count", torch.cuda.device_count, 0) or 0
    report["device_count"] = int(count)
    # torch < 1.6 has neither get_arch_list nor _cuda_getArchFlags: the list is then unknown (empty), and the
    # check reads what the build carries from its manifest, as for any probe that cannot tell.
    get_arch_list = getattr(torch.cuda, "get_arch_list", None)
    arch = (recorder.guarded("torch.cuda.get_arch_list", get_arch_list, []) or []) if get_arch_list else []
    if not arch and (cuda or hip):
        # get_arch_list() is empty whenever CUDA cannot start; the build still knows what it carries.
        flags = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
        arch = (recorder.guarded("torch._C._cuda_getArchFlags", flags) or "").split() if flags else []
    report["arch_list"] = [str(a) for a in arch]
    if (cuda or hip) and not available:
        # is_available() only warns; initialising CUDA raises the error that says why (driver too old, ...).
        recorder.guarded("torch.cuda.init", torch.cuda.init)

    def tensor(values, device=None):
        t = torch.tensor(values, dtype=torch.float32)
        return t.to(device) if device is not None else t

    a, b = matrix(CPU_N, CPU_N, 1), matrix(CPU_N, CPU_N, 2)
    image, weight = conv_inputs()
    report["cpu"]["checks"] = [
        run_check(recorder, "matmul", "cpu", lambda: torch.matmul(tensor(a), tensor(b)).tolist(),
                  lambda: py_matmul(a, b)),
        run_check(recorder, "conv2d", "cpu",
                  lambda: torch.nn.functional.conv2d(tensor([image]), tensor(weight)).tolist()[0],
                  lambda: py_conv2d(image, weight)),
    ]
    if not available:
        count = 0
    ga, gb = matrix(GPU_N, GPU_N, 3), matrix(GPU_N, GPU_N, 4)
    cpu_product = {}

    def reference():
        if "value" not in cpu_product:
            cpu_product["value"] = torch.matmul(tensor(ga), tensor(gb)).tolist()
        return cpu_product["value"]

    for index in range(count):
        device = {"index": index, "name": None, "compute_capability": None, "memory_mib": None, "checks": []}
        report["devices"].append(device)
        device["name"] = recorder.guarded("torch.cuda.get_device_name(%d)" % index,
                                          lambda: str(torch.cuda.get_device_name(index)))
        properties = recorder.guarded("torch.cuda.get_device_properties(%d)" % index,
                                      lambda: torch.cuda.get_device_properties(index))
        if hip:  # an AMD GPU: its target ("gfx90a:sramecc+:xnack-"), not a compute capability
            arch_name = getattr(properties, "gcnArchName", None)
            device["gfx"] = str(arch_name).split(":")[0] if arch_name else None
        else:
            capability = recorder.guarded("torch.cuda.get_device_capability(%d)" % index,
                                          lambda: torch.cuda.get_device_capability(index))
            if capability:
                device["compute_capability"] = "%d.%d" % tuple(capability)
        memory = getattr(properties, "total_memory", None)
        device["memory_mib"] = int(memory) // 2 ** 20 if memory else None
        where = "cuda:%d" % index

        def on_gpu(function):
            result = function()
            torch.cuda.synchronize(index)
            return result.cpu().tolist()

        device["checks"].append(run_check(
            recorder, "matmul", where,
            lambda: on_gpu(lambda: torch.matmul(tensor(ga, where), tensor(gb, where))), reference))
        device["cudnn"] = bool(recorder.guarded("torch.backends.cudnn.is_available",
                                                torch.backends.cudnn.is_available, False))
        device["checks"].append(run_check(
            recorder, "conv2d", where,
            lambda: on_gpu(lambda: torch.nn.functional.conv2d(tensor([image], where), tensor(weight, where)))[0],
            lambda: py_conv2d(image, weight)))
    report["companions"] = check_companions(recorder, "torch", options.get("companions") or [],
                                            ["cpu"] + ["cuda:%d" % index for index in range(count)],
                                            torch_operations(torch))
    if options["multi_gpu"]:
        report["multi_gpu"] = torch_multi_gpu(torch, count, options.get("multi_gpu_timeout", MULTI_GPU_TIMEOUT))
    if options["bench"]:
        report["bench"] = torch_bench(recorder, torch, count)


def torch_bench(recorder, torch, count):
    """Matrix products per GPU for about BENCH_SECONDS each: achieved TFLOP/s in float32 and float16."""
    result = bench_runs("torch", ["cuda:%d" % index for index in range(count)],
                        lambda index, dtype_name: _torch_bench_one(torch, index, getattr(torch, dtype_name)))
    if result.get("runs"):
        result["tf32"] = recorder.guarded("torch.backends.cuda.matmul.allow_tf32",
                                          lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    return result


def _torch_bench_one(torch, index, dtype):
    device = torch.device("cuda", index)
    a = torch.randn(BENCH_N, BENCH_N, device=device, dtype=dtype)
    b = torch.randn(BENCH_N, BENCH_N, device=device, dtype=dtype)
    return timed_products(lambda: torch.matmul(a, b), lambda product: torch.cuda.synchronize(index), BENCH_N)


def torch_multi_gpu(torch, count, timeout=MULTI_GPU_TIMEOUT):
    """An NCCL all-reduce with one process per GPU (this program in worker mode), with its bus bandwidth."""
    if count < 2:
        return too_few_gpus("torch", count)
    try:
        import torch.distributed as distributed

        nccl = distributed.is_available() and distributed.is_nccl_available()
    except Exception:
        nccl = False
    if not nccl:
        return {"ok": False, "skipped": None, "method": "NCCL all-reduce", "world_size": count,
                "error": {"where": "torch.distributed", "type": "NoNCCL",
                          "message": "this torch build has no NCCL (torch.distributed.is_nccl_available() is False)",
                          "traceback": ""}}
    scratch = tempfile.mkdtemp(prefix="envkit-nccl-")
    rendezvous = os.path.join(scratch, "rendezvous")
    workers = []
    try:
        for rank in range(count):
            command = [sys.executable, "-I", this_program(), "--nccl-worker", str(rank), str(count),
                       rendezvous, str(MULTI_GPU_BYTES), str(MULTI_GPU_ITERATIONS)]
            workers.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        deadline = time.time() + timeout
        outputs = []
        for worker in workers:
            try:
                out, err = worker.communicate(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                for other in workers:
                    if other.poll() is None:
                        other.kill()
                out, err = worker.communicate()
                outputs.append({"ok": False, "error": {"where": "nccl worker", "type": "Timeout", "message":
                                "the all-reduce did not finish within %g s" % timeout,
                                "traceback": clip(err.decode("utf-8", "replace"))}})
                continue
            try:
                outputs.append(json.loads(out.decode("utf-8", "replace")))
            except ValueError:
                outputs.append({"ok": False, "error": {"where": "nccl worker", "type": "NoReport", "message":
                                "worker exited with %s and printed no report" % worker.returncode,
                                "traceback": clip(err.decode("utf-8", "replace"))}})
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        for name in os.listdir(scratch):
            try:
                os.remove(os.path.join(scratch, name))
            except OSError:
                pass
        try:
            os.rmdir(scratch)
        except OSError:
            pass
    result = collective_result("NCCL all-reduce", count)
    result.update(ok=all(o.get("ok") is True for o in outputs), ranks=outputs)
    errors = [o.get("error") for o in outputs if o.get("error")]
    if errors:
        result["error"] = errors[0]
    times = [o.get("seconds_per_op") for o in outputs]
    if result["ok"] and all(isinstance(t, (int, float)) and t > 0 for t in times):
        set_bandwidth(result, max(times))  # a collective is as fast as its slowest rank
    return result


def nccl_worker(rank, world, rendezvous, nbytes, iterations):
    """One rank of the all-reduce (run as its own process): correctness first, then timing, as JSON."""
    out = {"rank": rank, "ok": False, "correct": None, "seconds_per_op": None, "error": None}
    try:
        import datetime

        import torch
        import torch.distributed as dist

        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method="file://" + rendezvous, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=MULTI_GPU_TIMEOUT))
        try:
            probe = torch.full((MULTI_GPU_CHECK_ELEMENTS,), float(rank + 1), device="cuda")
            dist.all_reduce(probe)
            torch.cuda.synchronize()
            expected = world * (world + 1) / 2.0
            out["correct"] = bool(torch.all(probe == expected).item())
            buffer = torch.zeros(nbytes // 4, dtype=torch.float32, device="cuda")
            for _ in range(3):
                dist.all_reduce(buffer)
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(iterations):
                dist.all_reduce(buffer)
            torch.cuda.synchronize()
            out["seconds_per_op"] = (time.perf_counter() - started) / iterations
            out["ok"] = out["correct"]
            if not out["correct"]:
                out["error"] = {"where": "all_reduce", "type": "WrongResult",
                                "message": "the all-reduce sum is wrong on rank %d" % rank, "traceback": ""}
        finally:
            dist.destroy_process_group()
    except Exception as exc:
        out["error"] = error_record("nccl rank %d" % rank, exc)
    return out


def this_program():
    """The zipapp this probe runs from (what Python was asked to run): each NCCL worker is one more run of it."""
    return os.path.abspath(sys.argv[0])
