"""envkit's post-install probe. Run by an environment's own Python, it prints ONE JSON document on stdout.

    python -I script.py FRAMEWORK [--multi-gpu] [--bench] [--multi-gpu-timeout=SECONDS]

FRAMEWORK is torch, tensorflow, jax, mxnet, or auto (the first of those that is installed). The probe imports the
framework, lists its GPUs, runs a matrix product (and a convolution) on the CPU and on EVERY GPU, compares each GPU
result with the CPU one, and records every warning, error message and traceback it meets. It never crashes without
printing its JSON: everything it does is guarded.

--multi-gpu: with two GPUs or more, a real all-reduce across all of them whose sum is checked, then timed (bus
bandwidth): torch: NCCL, one process per GPU (this script in --nccl-worker mode); tensorflow: a MirroredStrategy's
ReplicaContext.all_reduce; jax: a psum under jax.pmap. --bench: matrix products on each GPU, TFLOP/s in float32 and
float16 (torch, tensorflow, jax). Neither is built for mxnet (retired).

Rules for this file: standard library only, never import envkit (it runs inside another environment), and stay
valid on Python 3.6 (no walrus, no ``f"{x=}"``, no ``from __future__ import annotations``, no dataclasses).
"""

import contextlib
import io
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

PROBE_FORMAT = 1
FRAMEWORKS = ("torch", "tensorflow", "jax", "mxnet")
# Environment variables that explain what a framework sees (passed through by envkit's runner).
ENVIRONMENT_KEYS = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH",
    "SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
)
CPU_N = 24  # the CPU product is checked against a pure-Python one, so it stays small
GPU_N = 64  # each GPU's product is checked against the framework's own CPU product
TOLERANCE = 1e-2  # relative to the size of the values: TF32 convolutions stay far below it, wrong kernels far above
TEXT_LIMIT = 6000
STDERR_LIMIT = 20000
BENCH_SECONDS = 0.5
BENCH_N = 4096  # the benchmark multiplies two BENCH_N x BENCH_N matrices
BENCH_DTYPES = ("float32", "float16")
MULTI_GPU_BYTES = 64 * 2 ** 20  # what each GPU contributes to the timed all-reduce
MULTI_GPU_CHECK_ELEMENTS = 1024  # the all-reduce whose sum is checked: float32 values, replica/rank r gives r + 1
MULTI_GPU_ITERATIONS = 20
MULTI_GPU_TIMEOUT = 240.0  # seconds; the probe's --multi-gpu-timeout=SECONDS changes it


# --- recording ---------------------------------------------------------------------------------------------------

def _clip(text, limit=TEXT_LIMIT):
    text = str(text)
    return text if len(text) <= limit else "..." + text[-limit:]


def error_record(where, exc):
    """An exception as JSON: where it happened, its type, its message and the traceback text."""
    return {
        "where": where,
        "type": type(exc).__name__,
        "message": _clip(exc),
        "traceback": _clip(traceback.format_exc()),
    }


class Recorder(object):
    """The report being built, and the guard that turns any exception into an entry of it."""

    def __init__(self, report):
        self.report = report

    def guarded(self, where, function, default=None):
        try:
            return function()
        except Exception as exc:  # recorded, never raised: the probe must always print its JSON
            self.report["errors"].append(error_record(where, exc))
            return default


class TeeText(io.TextIOBase):
    """Python-level stderr that is also kept: numpy's "compiled using NumPy 1.x" message is written there."""

    def __init__(self, real):
        self.real = real
        self.kept = []
        self.size = 0

    def write(self, text):
        if self.size < STDERR_LIMIT:
            self.kept.append(text)
            self.size += len(text)
        try:
            return self.real.write(text)
        except Exception:
            return len(text)

    def flush(self):
        try:
            self.real.flush()
        except Exception:
            pass

    def fileno(self):
        return self.real.fileno()

    def isatty(self):
        return False

    @property
    def encoding(self):
        return getattr(self.real, "encoding", "utf-8")

    def text(self):
        return _clip("".join(self.kept), STDERR_LIMIT)


def _finite(value):
    return value is not None and not (math.isnan(value) or math.isinf(value))


# --- reference computations (pure Python) ------------------------------------------------------------------------

def matrix(rows, cols, seed):
    """Deterministic values in [-1, 1): the same inputs for every framework and every run."""
    state = seed
    out = []
    for _ in range(rows):
        row = []
        for _ in range(cols):
            state = (1103515245 * state + 12345) % 2147483648
            row.append(state / 1073741824.0 - 1.0)
        out.append(row)
    return out


def py_matmul(a, b):
    columns = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, column)) for column in columns] for row in a]


def conv_inputs():
    """An image of 3 channels, 10x10, and 4 filters of 3x3: channel-first nested lists."""
    flat = matrix(3 * 10, 10, 7)
    image = [flat[c * 10:(c + 1) * 10] for c in range(3)]
    wflat = matrix(4 * 3 * 3, 3, 11)
    weight = [[wflat[(k * 3 + c) * 3:(k * 3 + c + 1) * 3] for c in range(3)] for k in range(4)]
    return image, weight


def py_conv2d(image, weight):
    """Valid cross-correlation (what every framework's conv2d computes): [C][H][W] x [K][C][3][3] -> [K][H-2][W-2]."""
    channels, height, width = len(image), len(image[0]), len(image[0][0])
    out = []
    for kernel in weight:
        plane = []
        for y in range(height - 2):
            row = []
            for x in range(width - 2):
                total = 0.0
                for c in range(channels):
                    for dy in range(3):
                        for dx in range(3):
                            total += image[c][y + dy][x + dx] * kernel[c][dy][dx]
                row.append(total)
            plane.append(row)
        out.append(plane)
    return out


def flatten(value):
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            out.extend(flatten(item))
        return out
    return [float(value)]


def compare(got, want):
    """(ok, max_error, tolerance, problem): ok when every value is finite and within TOLERANCE of the reference."""
    got, want = flatten(got), flatten(want)
    scale = max([abs(w) for w in want] or [0.0])
    tolerance = TOLERANCE * (1.0 + scale)
    if len(got) != len(want):
        return False, None, tolerance, "the result has %d values, not %d" % (len(got), len(want))
    worst = 0.0
    for g, w in zip(got, want):
        if not _finite(g):
            return False, None, tolerance, "the result has NaN or infinite values"
        worst = max(worst, abs(g - w))
    if worst > tolerance:
        return False, worst, tolerance, "the result differs from the reference by up to %.3g (tolerance %.3g)" % (
            worst, tolerance)
    return True, worst, tolerance, None


def run_check(recorder, name, device, compute, reference):
    """Run ``compute()`` (-> nested lists) and compare it with ``reference()``; never raises.

    ``error`` is set when the computation raised; ``problem`` when it ran and gave a wrong result.
    """
    check = {"name": name, "device": device, "ok": False, "max_error": None, "tolerance": None,
             "seconds": None, "problem": None, "error": None}
    started = time.time()
    try:
        got = compute()
        check["seconds"] = round(time.time() - started, 4)
    except Exception as exc:
        check["seconds"] = round(time.time() - started, 4)
        check["error"] = error_record("%s on %s" % (name, device), exc)
        return check
    try:
        ok, error, tolerance, problem = compare(got, reference())
    except Exception as exc:  # the reference itself failed (the CPU product on the framework's CPU)
        check["error"] = error_record("%s reference for %s" % (name, device), exc)
        return check
    check.update(ok=ok, max_error=error, tolerance=tolerance, problem=problem)
    return check


def _cuda_text(number):
    """1000 * major + 10 * minor (12080) -> '12.8'; other forms are returned as text."""
    try:
        number = int(number)
    except (TypeError, ValueError):
        return None if number is None else str(number)
    if number <= 0:
        return None
    return "%d.%d" % (number // 1000, (number % 1000) // 10)


def distributions(prefixes):
    """Installed distributions whose name starts with one of the prefixes: {name: version}."""
    found = {}
    try:
        from importlib import metadata  # Python 3.8+
        for dist in metadata.distributions():
            name = (dist.metadata["Name"] or "").lower()
            if any(name.startswith(p) for p in prefixes):
                found[name] = dist.version
    except Exception:
        try:
            import pkg_resources
            for dist in pkg_resources.working_set:
                name = dist.project_name.lower()
                if any(name.startswith(p) for p in prefixes):
                    found[name] = dist.version
        except Exception:
            pass
    return found


def skipped(reason):
    return {"ok": None, "skipped": reason}


def skip_retired_options(report, options, framework):
    """--multi-gpu and --bench are built for torch, tensorflow and jax; not for a retired framework (MXNet)."""
    why = "not built for %s, a retired framework (built for torch, tensorflow and jax)" % framework
    if options["multi_gpu"]:
        report["multi_gpu"] = skipped(why)
    if options["bench"]:
        report["bench"] = skipped(why)


# --- --multi-gpu and --bench, shared by the frameworks -------------------------------------------------------------

def too_few_gpus(framework, count):
    return skipped("needs at least 2 GPUs; this machine has %d (visible to %s)" % (count, framework))


# Threads of a collective that did not finish in time: main() exits without waiting for them once the JSON is out.
_STUCK = []
STUCK_GPUS = "not run: the --multi-gpu all-reduce is stuck on these GPUs"


def collective_within_deadline(function, method, count, seconds):
    """``function()`` -> the --multi-gpu report, run in a daemon thread and waited for at most ``seconds``: an
    all-reduce stuck in NCCL (broken peer-to-peer transfers, a hung GPU) becomes a Timeout error of the report
    instead of taking the whole report with it. (torch's all-reduce runs in worker processes with the same limit.)"""
    box = []

    def target():
        try:
            box.append(function())
        except BaseException as exc:  # recorded, never raised, as everywhere in the probe
            box.append(dict(collective_result(method, count), error=error_record(method, exc)))

    thread = threading.Thread(target=target, name="envkit-multi-gpu")
    thread.daemon = True
    thread.start()
    thread.join(seconds)
    if box:
        return box[0]
    _STUCK.append(thread)
    result = collective_result(method, count)
    result["error"] = {"where": method, "type": "Timeout", "traceback": "",
                       "message": "the %s did not finish within %g s" % (method, seconds)}
    return result


def collective_result(method, count):
    """The --multi-gpu report of every framework: ok, the collective's name, and the bandwidth once it is timed."""
    return {"ok": False, "skipped": None, "method": method, "world_size": count, "bytes": MULTI_GPU_BYTES,
            "seconds_per_op": None, "algbw_gbs": None, "busbw_gbs": None, "error": None}


def set_bandwidth(result, seconds_per_op):
    """Bandwidth as nccl-tests reports it: algbw = bytes per GPU / time, busbw = algbw * 2 (n - 1) / n, the rate
    each GPU's links carry in a ring all-reduce, comparable between GPU counts."""
    count = result["world_size"]
    if not (isinstance(seconds_per_op, (int, float)) and seconds_per_op > 0):
        return
    algbw = MULTI_GPU_BYTES / seconds_per_op / 1e9
    result.update(seconds_per_op=seconds_per_op, algbw_gbs=round(algbw, 3),
                  busbw_gbs=round(algbw * 2.0 * (count - 1) / count, 3))


def wrong_sum(where, expected, got):
    message = "the all-reduce sum is wrong on %s: every value should be %g, one is %r" % (where, expected, got)
    return {"where": where, "type": "WrongResult", "message": message, "traceback": ""}


def first_wrong(values, expected, size):
    """None when ``values`` is ``size`` values all equal to ``expected`` (sums of small integers are exact), else the
    first value that is not (or a note on the length)."""
    if len(values) != size:
        return "%d values instead of %d" % (len(values), size)
    for value in values:
        if value != expected:
            return value
    return None


def bench_runs(framework, places, one):
    """``one(index, dtype_name)`` -> {n, iterations, seconds, tflops} for every GPU (``places``: how the framework
    names each) and every type of BENCH_DTYPES; an error is kept per run."""
    if not places:
        return skipped("needs a GPU; %s sees none here" % framework)
    runs = []
    for index, where in enumerate(places):
        for dtype_name in BENCH_DTYPES:
            run = {"index": index, "dtype": dtype_name, "n": None, "iterations": None, "seconds": None,
                   "tflops": None, "error": None}
            try:
                run.update(one(index, dtype_name))
            except Exception as exc:
                run["error"] = error_record("bench %s on %s" % (dtype_name, where), exc)
            runs.append(run)
    return {"ok": all(r["error"] is None for r in runs), "runs": runs, "tf32": None}


def timed_products(step, finish, n):
    """Matrix products for about BENCH_SECONDS: ``step()`` queues one and returns it, ``finish(product)`` waits until
    it (and so every product queued before it on that GPU) is done. Two to warm up, one to size the run."""
    last = None
    for _ in range(2):
        last = step()
    finish(last)
    started = time.perf_counter()
    finish(step())
    once = max(time.perf_counter() - started, 1e-6)
    iterations = int(min(200, max(3, BENCH_SECONDS / once)))
    started = time.perf_counter()
    for _ in range(iterations):
        last = step()
    finish(last)
    seconds = time.perf_counter() - started
    return {"n": n, "iterations": iterations, "seconds": round(seconds, 6),
            "tflops": round(2.0 * n ** 3 * iterations / seconds / 1e12, 3)}


# --- torch -------------------------------------------------------------------------------------------------------

def probe_torch(report, recorder, options):
    import torch

    report["version"] = str(getattr(torch, "__version__", "unknown"))
    version = getattr(torch, "version", None)
    cuda = getattr(version, "cuda", None)
    report["cuda"] = str(cuda) if cuda else None
    report["gpu_build"] = bool(cuda)
    report["cudnn"] = recorder.guarded("torch.backends.cudnn.version", lambda: _text(torch.backends.cudnn.version()))
    available = bool(recorder.guarded("torch.cuda.is_available", torch.cuda.is_available, False))
    report["gpu_available"] = available
    count = recorder.guarded("torch.cuda.device_count", torch.cuda.device_count, 0) or 0
    report["device_count"] = int(count)
    arch = recorder.guarded("torch.cuda.get_arch_list", torch.cuda.get_arch_list, []) or []
    if not arch and cuda:
        # get_arch_list() is empty whenever CUDA cannot start; the build still knows what it carries.
        flags = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
        arch = (recorder.guarded("torch._C._cuda_getArchFlags", flags) or "").split() if flags else []
    report["arch_list"] = [str(a) for a in arch]
    if cuda and not available:
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
        capability = recorder.guarded("torch.cuda.get_device_capability(%d)" % index,
                                      lambda: torch.cuda.get_device_capability(index))
        if capability:
            device["compute_capability"] = "%d.%d" % tuple(capability)
        properties = recorder.guarded("torch.cuda.get_device_properties(%d)" % index,
                                      lambda: torch.cuda.get_device_properties(index))
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
    if options["multi_gpu"]:
        report["multi_gpu"] = torch_multi_gpu(torch, count, options.get("multi_gpu_timeout", MULTI_GPU_TIMEOUT))
    if options["bench"]:
        report["bench"] = torch_bench(recorder, torch, count)


def _text(value):
    return None if value is None else str(value)


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
    """An NCCL all-reduce with one process per GPU (this script in worker mode), with its bus bandwidth."""
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
            command = [sys.executable, "-I", os.path.abspath(__file__), "--nccl-worker", str(rank), str(count),
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
                                "traceback": _clip(err.decode("utf-8", "replace"))}})
                continue
            try:
                outputs.append(json.loads(out.decode("utf-8", "replace")))
            except ValueError:
                outputs.append({"ok": False, "error": {"where": "nccl worker", "type": "NoReport", "message":
                                "worker exited with %s and printed no report" % worker.returncode,
                                "traceback": _clip(err.decode("utf-8", "replace"))}})
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


# --- tensorflow ----------------------------------------------------------------------------------------------------

def probe_tensorflow(report, recorder, options):
    import tensorflow as tf

    report["version"] = str(getattr(tf, "__version__", None) or getattr(tf, "VERSION", "unknown"))
    info = {}
    sysconfig = getattr(tf, "sysconfig", None)
    if sysconfig is not None and hasattr(sysconfig, "get_build_info"):
        info = dict(recorder.guarded("tf.sysconfig.get_build_info", sysconfig.get_build_info, {}) or {})
    report["build_info"] = dict((str(k), _text(v) if not isinstance(v, (list, bool)) else v) for k, v in info.items())
    gpu_build = info.get("is_cuda_build")
    if gpu_build is None:
        gpu_build = recorder.guarded("tf.test.is_built_with_cuda", tf.test.is_built_with_cuda, False)
    report["gpu_build"] = bool(gpu_build)
    report["cuda"] = _text(info.get("cuda_version")) if gpu_build else None
    report["cudnn"] = _text(info.get("cudnn_version")) if gpu_build else None
    report["arch_list"] = [str(a) for a in (info.get("cuda_compute_capabilities") or [])]
    eager = bool(recorder.guarded("tf.executing_eagerly", getattr(tf, "executing_eagerly", lambda: False), False))
    gpus = _tf_gpus(recorder, tf)
    report["gpu_available"] = bool(gpus)
    report["device_count"] = len(gpus)

    def run(build, device):
        if eager:
            with tf.device(device):
                tensor = build()
            return tensor.numpy().tolist(), str(tensor.device)
        compat = getattr(tf, "compat", None)
        v1 = getattr(compat, "v1", tf)
        graph = tf.Graph()
        with graph.as_default(), tf.device(device):
            tensor = build()
        config = v1.ConfigProto(allow_soft_placement=False)
        config.gpu_options.allow_growth = True
        with v1.Session(graph=graph, config=config) as session:
            return session.run(tensor).tolist(), str(tensor.device)

    def placed(build, device):
        values, where = run(build, device)
        kind, _, number = device.strip("/").partition(":")
        if kind.upper() == "GPU" and ("GPU:" + number) not in where.upper():
            raise RuntimeError("TensorFlow ran the computation on %r, not on %s" % (where, device))
        return values

    a, b = matrix(CPU_N, CPU_N, 1), matrix(CPU_N, CPU_N, 2)
    image, weight = conv_inputs()
    nhwc = [[[[image[c][y][x] for c in range(3)] for x in range(10)] for y in range(10)]]
    hwio = [[[[weight[k][c][y][x] for k in range(4)] for c in range(3)] for x in range(3)] for y in range(3)]

    def conv(device):
        out = placed(lambda: tf.nn.conv2d(tf.constant(nhwc, dtype=tf.float32), tf.constant(hwio, dtype=tf.float32),
                                          strides=[1, 1, 1, 1], padding="VALID"), device)[0]
        return [[[out[y][x][k] for x in range(8)] for y in range(8)] for k in range(4)]  # back to [K][H][W]

    def matmul(x, y, device):
        return placed(lambda: tf.matmul(tf.constant(x, dtype=tf.float32), tf.constant(y, dtype=tf.float32)), device)

    report["cpu"]["checks"] = [
        run_check(recorder, "matmul", "cpu", lambda: matmul(a, b, "/CPU:0"), lambda: py_matmul(a, b)),
        run_check(recorder, "conv2d", "cpu", lambda: conv("/CPU:0"), lambda: py_conv2d(image, weight)),
    ]
    ga, gb = matrix(GPU_N, GPU_N, 3), matrix(GPU_N, GPU_N, 4)
    cpu_product = {}

    def reference():
        if "value" not in cpu_product:
            cpu_product["value"] = matmul(ga, gb, "/CPU:0")
        return cpu_product["value"]

    for index, gpu in enumerate(gpus):
        gpu["checks"] = []
        report["devices"].append(gpu)
        where = "/GPU:%d" % index
        gpu["checks"].append(run_check(recorder, "matmul", where, lambda: matmul(ga, gb, where), reference))
        gpu["checks"].append(run_check(recorder, "conv2d", where, lambda: conv(where),
                                       lambda: py_conv2d(image, weight)))
    if options["multi_gpu"]:
        report["multi_gpu"] = collective_within_deadline(
            lambda: tf_multi_gpu(tf, len(gpus), eager), "MirroredStrategy all-reduce", len(gpus),
            options.get("multi_gpu_timeout", MULTI_GPU_TIMEOUT))
    if options["bench"]:
        report["bench"] = skipped(STUCK_GPUS) if _STUCK else tf_bench(recorder, tf, len(gpus), eager)


# NOT YET RUN ON A GPU: tf_multi_gpu and tf_bench were written against TensorFlow 2's documented APIs and run, in
# envkit's tests, only against the stand-in of tests/probe/fakes/tensorflow.

def tf_multi_gpu(tf, count, eager):
    """A MirroredStrategy over every GPU: each replica all-reduces (ReplicaContext.all_reduce, SUM) a tensor filled
    with its replica id + 1 and gets the right sum back on its own GPU; then a chain of all-reduces of
    MULTI_GPU_BYTES per GPU in one tf.function is timed."""
    if count < 2:
        return too_few_gpus("tensorflow", count)
    if not eager:
        return skipped("needs TensorFlow 2 (eager execution); this TensorFlow runs graphs only")
    result = collective_result("MirroredStrategy all-reduce", count)
    try:
        distribute = tf.distribute
        strategy = distribute.MirroredStrategy(devices=["/gpu:%d" % index for index in range(count)])
        implementation = _tf_cross_device_ops(strategy)
        if implementation:
            result["method"] = "MirroredStrategy all-reduce (%s)" % implementation
        replicas = int(strategy.num_replicas_in_sync)
        if replicas != count:
            raise RuntimeError("MirroredStrategy made %d replicas for %d GPUs" % (replicas, count))
        run = getattr(strategy, "run", None) or strategy.experimental_run_v2  # experimental_run_v2: TF 2.0, 2.1
        total = distribute.ReduceOp.SUM
        elements = MULTI_GPU_BYTES // 4

        def contribute():
            context = distribute.get_replica_context()
            mine = tf.fill([MULTI_GPU_CHECK_ELEMENTS], tf.cast(context.replica_id_in_sync_group + 1, tf.float32))
            return context.all_reduce(total, mine)

        def chain():
            context = distribute.get_replica_context()
            values = tf.zeros([elements], dtype=tf.float32)  # zeros: the sums stay zero however long the chain
            for _ in range(MULTI_GPU_ITERATIONS):
                values = context.all_reduce(total, values)
            return values[:1]  # one value per GPU to copy back: it depends on every all-reduce of the chain

        expected = count * (count + 1) / 2.0
        sums = strategy.experimental_local_results(tf.function(lambda: run(contribute))())
        places = [re.search(r"GPU:(\d+)$", str(t.device).upper()) for t in sums]
        places = sorted(int(found.group(1)) for found in places if found)
        if places != list(range(count)):
            raise RuntimeError("the all-reduce results are on %s, not one on each of the %d GPUs"
                               % ([str(t.device) for t in sums], count))
        for replica, values in enumerate(sums):
            wrong = first_wrong(values.numpy().tolist(), expected, MULTI_GPU_CHECK_ELEMENTS)
            if wrong is not None:
                result["error"] = wrong_sum("replica %d" % replica, expected, wrong)
                return result
        step = tf.function(lambda: run(chain))

        def wait(out):
            for value in strategy.experimental_local_results(out):
                value.numpy()

        wait(step())  # traced, and run once
        started = time.perf_counter()
        wait(step())
        set_bandwidth(result, (time.perf_counter() - started) / MULTI_GPU_ITERATIONS)
        result["ok"] = True
    except Exception as exc:
        result["error"] = error_record("tf.distribute.MirroredStrategy over %d GPUs" % count, exc)
    return result


def _tf_cross_device_ops(strategy):
    """The class that does MirroredStrategy's all-reduce (NcclAllReduce, or a fallback such as
    ReductionToOneDevice where NCCL is missing): a private attribute, read only to explain the bandwidth."""
    try:
        extended = strategy.extended
        ops = getattr(extended, "_cross_device_ops", None) or getattr(extended, "_inferred_cross_device_ops", None)
        return type(ops).__name__ if ops is not None else None
    except Exception:
        return None


def tf_bench(recorder, tf, count, eager):
    """Matrix products on each GPU for about BENCH_SECONDS: achieved TFLOP/s in float32 and float16."""
    if count and not eager:
        return skipped("needs TensorFlow 2 (eager execution); this TensorFlow runs graphs only")

    def one(index, dtype_name):
        where = "/GPU:%d" % index
        dtype = getattr(tf, dtype_name)
        with tf.device(where):
            a = tf.cast(tf.random.normal([BENCH_N, BENCH_N]), dtype)
            b = tf.cast(tf.random.normal([BENCH_N, BENCH_N]), dtype)

            def finish(product):
                if ("GPU:%d" % index) not in str(product.device).upper():
                    raise RuntimeError("TensorFlow ran the product on %r, not on %s" % (str(product.device), where))
                product[0, 0].numpy()  # one value to the host: waits for every product queued on this GPU

            return timed_products(lambda: tf.matmul(a, b), finish, BENCH_N)

    result = bench_runs("tensorflow", ["/GPU:%d" % index for index in range(count)], one)
    enabled = getattr(getattr(getattr(tf, "config", None), "experimental", None),
                      "tensor_float_32_execution_enabled", None)  # TF 2.4+
    if result.get("runs") and enabled is not None:
        result["tf32"] = recorder.guarded("tf.config.experimental.tensor_float_32_execution_enabled",
                                          lambda: bool(enabled()))
    return result


def _tf_gpus(recorder, tf):
    """Each GPU TensorFlow lists: index, name, compute capability."""
    config = getattr(tf, "config", None)
    lister = getattr(config, "list_physical_devices", None) or getattr(
        getattr(config, "experimental", None), "list_physical_devices", None)
    if lister is None:
        return _tf1_gpus(recorder)
    found = recorder.guarded("tf.config.list_physical_devices", lambda: lister("GPU"), []) or []
    gpus = []
    experimental = getattr(config, "experimental", None)
    for index, device in enumerate(found):
        if experimental is not None and hasattr(experimental, "set_memory_growth"):
            recorder.guarded("set_memory_growth", lambda: experimental.set_memory_growth(device, True))
        details = {}
        if experimental is not None and hasattr(experimental, "get_device_details"):
            details = recorder.guarded("get_device_details", lambda: experimental.get_device_details(device), {}) or {}
        capability = details.get("compute_capability")
        gpus.append({
            "index": index,
            "name": details.get("device_name") or str(getattr(device, "name", "GPU %d" % index)),
            "compute_capability": "%d.%d" % tuple(capability) if capability else None,
            "memory_mib": None,
        })
    return gpus


def _tf1_gpus(recorder):
    """TensorFlow 1.x: the local device list, whose description carries the name and capability."""
    def listing():
        from tensorflow.python.client import device_lib
        return device_lib.list_local_devices()

    gpus = []
    for device in recorder.guarded("device_lib.list_local_devices", listing, []) or []:
        if getattr(device, "device_type", "") != "GPU":
            continue
        description = str(getattr(device, "physical_device_desc", ""))
        name = re.search(r"name: ([^,]+)", description)
        capability = re.search(r"compute capability: (\d+\.\d+)", description)
        gpus.append({
            "index": len(gpus),
            "name": name.group(1).strip() if name else "GPU %d" % len(gpus),
            "compute_capability": capability.group(1) if capability else None,
            "memory_mib": int(getattr(device, "memory_limit", 0)) // 2 ** 20 or None,
        })
    return gpus


# --- jax -----------------------------------------------------------------------------------------------------------

def probe_jax(report, recorder, options):
    import jax
    import jax.numpy as jnp

    report["version"] = str(getattr(jax, "__version__", "unknown"))
    dists = distributions(("jax",))
    report["distributions"] = dists
    jaxlib = dists.get("jaxlib", "")
    plugin = [name for name in dists if name.startswith("jax-cuda")]
    versions = recorder.guarded("jax cuda_versions", lambda: _jax_cuda_versions(), {}) or {}
    report["cuda"] = versions.get("cuda")
    report["cudnn"] = versions.get("cudnn")
    report["gpu_build"] = bool(plugin or "+cuda" in jaxlib or versions.get("cuda"))
    report["backend"] = recorder.guarded("jax.default_backend", jax.default_backend)
    found = []
    if report["gpu_build"]:
        # Asking for the GPU backend by name raises the error that says why it did not start.
        found = recorder.guarded("jax.devices('gpu')", lambda: list(jax.devices("gpu")), []) or []
    else:
        found = [d for d in (recorder.guarded("jax.devices", jax.devices, []) or [])
                 if str(getattr(d, "platform", "")).lower() in ("gpu", "cuda")]
    report["gpu_available"] = bool(found)
    report["device_count"] = len(found)
    cpus = recorder.guarded("jax.devices('cpu')", lambda: list(jax.devices("cpu")), []) or []

    def on(device, function, *arrays):
        placed = [jax.device_put(jnp.asarray(x, dtype=jnp.float32), device) for x in arrays]
        return jax.device_get(function(*placed)).tolist()

    def conv(lhs, rhs):
        return jax.lax.conv(lhs, rhs, (1, 1), "VALID")

    a, b = matrix(CPU_N, CPU_N, 1), matrix(CPU_N, CPU_N, 2)
    image, weight = conv_inputs()
    cpu = cpus[0] if cpus else None
    report["cpu"]["checks"] = [
        run_check(recorder, "matmul", "cpu", lambda: on(cpu, jnp.dot, a, b), lambda: py_matmul(a, b)),
        run_check(recorder, "conv2d", "cpu", lambda: on(cpu, conv, [image], weight)[0],
                  lambda: py_conv2d(image, weight)),
    ]
    ga, gb = matrix(GPU_N, GPU_N, 3), matrix(GPU_N, GPU_N, 4)
    cpu_product = {}

    def reference():
        if "value" not in cpu_product:
            cpu_product["value"] = on(cpu, jnp.dot, ga, gb)
        return cpu_product["value"]

    for index, device in enumerate(found):
        capability = getattr(device, "compute_capability", None)
        entry = {"index": index, "name": str(getattr(device, "device_kind", device)),
                 "compute_capability": str(capability) if capability else None, "memory_mib": None, "checks": []}
        report["devices"].append(entry)
        where = "%s:%d" % (getattr(device, "platform", "gpu"), getattr(device, "id", index))
        entry["checks"].append(run_check(recorder, "matmul", where,
                                         lambda: on(device, jnp.dot, ga, gb), reference))
        entry["checks"].append(run_check(recorder, "conv2d", where, lambda: on(device, conv, [image], weight)[0],
                                         lambda: py_conv2d(image, weight)))
    if options["multi_gpu"]:
        report["multi_gpu"] = collective_within_deadline(
            lambda: jax_multi_gpu(jax, jnp, found), "pmap psum", len(found),
            options.get("multi_gpu_timeout", MULTI_GPU_TIMEOUT))
    if options["bench"]:
        report["bench"] = skipped(STUCK_GPUS) if _STUCK else jax_bench(jax, jnp, found)


# NOT YET RUN ON A GPU: jax_multi_gpu and jax_bench were written against JAX's documented APIs and run, in envkit's
# tests, only against the stand-in of tests/probe/fakes/jax.

def jax_multi_gpu(jax, jnp, gpus):
    """jax.pmap over every GPU with a jax.lax.psum (an NCCL all-reduce on GPUs): each GPU contributes its index + 1 and
    must get the right sum back; then a chain of psums of MULTI_GPU_BYTES per GPU is timed."""
    count = len(gpus)
    if count < 2:
        return too_few_gpus("jax", count)
    result = collective_result("pmap psum", count)
    try:
        def filler(size):
            return jax.pmap(lambda value: jnp.full((size,), value, dtype=jnp.float32), devices=gpus)

        allreduce = jax.pmap(lambda values: jax.lax.psum(values, "gpus"), axis_name="gpus", devices=gpus)
        expected = count * (count + 1) / 2.0
        mine = filler(MULTI_GPU_CHECK_ELEMENTS)(jnp.asarray([i + 1.0 for i in range(count)], dtype=jnp.float32))
        sums = jax.device_get(allreduce(mine)).tolist()
        if len(sums) != count:
            raise RuntimeError("the psum gave %d results for %d GPUs" % (len(sums), count))
        for index, values in enumerate(sums):
            wrong = first_wrong(values, expected, MULTI_GPU_CHECK_ELEMENTS)
            if wrong is not None:
                result["error"] = wrong_sum("GPU %d" % index, expected, wrong)
                return result
        # Zeros, so the sums stay zero however long the chain; each psum takes the one before as input.
        values = filler(MULTI_GPU_BYTES // 4)(jnp.asarray([0.0] * count, dtype=jnp.float32))
        for _ in range(3):
            values = allreduce(values)  # the first call compiles
        values.block_until_ready()
        started = time.perf_counter()
        for _ in range(MULTI_GPU_ITERATIONS):
            values = allreduce(values)
        values.block_until_ready()
        set_bandwidth(result, (time.perf_counter() - started) / MULTI_GPU_ITERATIONS)
        result["ok"] = True
    except Exception as exc:
        result["error"] = error_record("jax.pmap psum over %d GPUs" % count, exc)
    return result


def jax_bench(jax, jnp, gpus):
    """Matrix products on each GPU for about BENCH_SECONDS: achieved TFLOP/s in float32 and float16. Whether float32
    products use TF32 depends on jax_default_matmul_precision and XLA's flags: "tf32" stays null."""
    product = jax.jit(jnp.dot)

    def one(index, dtype_name):
        dtype = getattr(jnp, dtype_name)
        device = gpus[index]
        # Inputs made on the GPU itself: the random numbers follow their key, committed to that device.
        a = jax.random.normal(jax.device_put(jax.random.PRNGKey(2 * index), device), (BENCH_N, BENCH_N), dtype=dtype)
        b = jax.random.normal(jax.device_put(jax.random.PRNGKey(2 * index + 1), device), (BENCH_N, BENCH_N),
                              dtype=dtype)
        return timed_products(lambda: product(a, b), lambda out: out.block_until_ready(), BENCH_N)

    return bench_runs("jax", ["%s:%d" % (getattr(d, "platform", "gpu"), getattr(d, "id", i))
                              for i, d in enumerate(gpus)], one)


def _jax_cuda_versions():
    from jax._src.lib import cuda_versions  # present when a CUDA plugin is installed

    if cuda_versions is None:
        return {}
    return {"cuda": _cuda_text(cuda_versions.cuda_runtime_get_version()),
            "cudnn": _text(cuda_versions.cudnn_get_version())}


# --- mxnet ---------------------------------------------------------------------------------------------------------

def probe_mxnet(report, recorder, options):
    import mxnet as mx

    report["version"] = str(getattr(mx, "__version__", "unknown"))
    dists = distributions(("mxnet",))
    report["distributions"] = dists
    features = recorder.guarded("mx.runtime.Features", lambda: mx.runtime.Features(), None)
    cuda_enabled = None
    if features is not None:
        cuda_enabled = bool(recorder.guarded("Features.is_enabled('CUDA')", lambda: features.is_enabled("CUDA")))
        report["cudnn"] = "enabled" if recorder.guarded("Features.is_enabled('CUDNN')",
                                                       lambda: features.is_enabled("CUDNN")) else None
    variant = [re.match(r"mxnet-cu(\d+)(\d)$", name) for name in dists]
    variant = [m for m in variant if m]
    report["cuda"] = "%s.%s" % (variant[0].group(1), variant[0].group(2)) if variant else None
    report["gpu_build"] = bool(cuda_enabled) if cuda_enabled is not None else bool(variant)
    count = recorder.guarded("mx.context.num_gpus", lambda: mx.context.num_gpus(), 0) or 0
    report["gpu_available"] = count > 0
    report["device_count"] = int(count)
    report["arch_list"] = []

    def on(context, function, *arrays):
        placed = [mx.nd.array(x, ctx=context, dtype="float32") for x in arrays]
        return function(*placed).asnumpy().tolist()

    def conv(x, w):
        return mx.nd.Convolution(data=x, weight=w, no_bias=True, kernel=(3, 3), num_filter=4)

    a, b = matrix(CPU_N, CPU_N, 1), matrix(CPU_N, CPU_N, 2)
    image, weight = conv_inputs()
    report["cpu"]["checks"] = [
        run_check(recorder, "matmul", "cpu", lambda: on(mx.cpu(), mx.nd.dot, a, b), lambda: py_matmul(a, b)),
        run_check(recorder, "conv2d", "cpu", lambda: on(mx.cpu(), conv, [image], weight)[0],
                  lambda: py_conv2d(image, weight)),
    ]
    ga, gb = matrix(GPU_N, GPU_N, 3), matrix(GPU_N, GPU_N, 4)
    cpu_product = {}

    def reference():
        if "value" not in cpu_product:
            cpu_product["value"] = on(mx.cpu(), mx.nd.dot, ga, gb)
        return cpu_product["value"]

    for index in range(count):
        memory = recorder.guarded("mx.context.gpu_memory_info(%d)" % index,
                                  lambda: mx.context.gpu_memory_info(index))
        entry = {"index": index, "name": None, "compute_capability": None,
                 "memory_mib": int(memory[1]) // 2 ** 20 if memory else None, "checks": []}
        report["devices"].append(entry)
        context = mx.gpu(index)
        where = "gpu(%d)" % index
        entry["checks"].append(run_check(recorder, "matmul", where, lambda: on(context, mx.nd.dot, ga, gb),
                                         reference))
        entry["checks"].append(run_check(recorder, "conv2d", where, lambda: on(context, conv, [image], weight)[0],
                                         lambda: py_conv2d(image, weight)))
    skip_retired_options(report, options, "mxnet")


PROBES = {"torch": probe_torch, "tensorflow": probe_tensorflow, "jax": probe_jax, "mxnet": probe_mxnet}


# --- main ------------------------------------------------------------------------------------------------------------

def installed_frameworks():
    """The frameworks whose top-level package can be found, without importing any of them."""
    try:
        from importlib.util import find_spec
    except ImportError:
        return []
    found = []
    for name in FRAMEWORKS:
        try:
            if find_spec(name) is not None:
                found.append(name)
        except Exception:
            found.append(name)  # a broken package is still "installed": importing it will say how it is broken
    return found


def new_report(framework, options):
    return {
        "probe_format": PROBE_FORMAT,
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "environment": dict((k, os.environ.get(k)) for k in ENVIRONMENT_KEYS),
        "requested": framework,
        "installed": [],
        "framework": None,
        "imported": False,
        "import_seconds": None,
        "import_error": None,
        "version": None,
        "gpu_build": None,
        "cuda": None,
        "cudnn": None,
        "gpu_available": None,
        "device_count": None,
        "arch_list": [],
        "cpu": {"checks": []},
        "devices": [],
        "multi_gpu": None,
        "bench": None,
        "errors": [],
        "warnings": [],
        "stderr": "",
        "probe_error": None,
        "options": options,
    }


def run(report, argv):
    recorder = Recorder(report)
    requested = report["requested"]
    report["installed"] = installed_frameworks()
    if requested == "auto":
        if not report["installed"]:
            report["import_error"] = {"where": "import", "type": "ModuleNotFoundError", "message":
                                      "none of %s is installed" % ", ".join(FRAMEWORKS), "traceback": ""}
            return
        framework = report["installed"][0]
    elif requested in PROBES:
        framework = requested
    else:
        report["probe_error"] = {"where": "arguments", "type": "UsageError", "message":
                                 "unknown framework %r; expected auto, %s" % (requested, ", ".join(FRAMEWORKS)),
                                 "traceback": ""}
        return
    report["framework"] = framework
    started = time.time()
    try:
        __import__(framework)
    except BaseException as exc:  # ImportError, but also SystemExit or a crash of an extension's init code
        report["import_error"] = error_record("import %s" % framework, exc)
        report["import_seconds"] = round(time.time() - started, 3)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return
    report["import_seconds"] = round(time.time() - started, 3)
    report["imported"] = True
    PROBES[framework](report, recorder, report["options"])


def main(argv):
    if len(argv) >= 6 and argv[0] == "--nccl-worker":
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        result = nccl_worker(int(argv[1]), int(argv[2]), argv[3], int(argv[4]), int(argv[5]))
        out.write(json.dumps(result))
        out.flush()
        return 0
    # Anything the framework writes to stdout (C code included) goes to stderr: stdout is for the JSON alone.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    requested = argv[0] if argv else "auto"
    options = {"multi_gpu": "--multi-gpu" in argv[1:], "bench": "--bench" in argv[1:],
               "multi_gpu_timeout": MULTI_GPU_TIMEOUT}
    for arg in argv[1:]:
        if arg.startswith("--multi-gpu-timeout="):
            try:
                options["multi_gpu_timeout"] = max(1.0, float(arg.partition("=")[2]))
            except ValueError:
                pass
    report = new_report(requested, options)
    tee = TeeText(sys.stderr)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.redirect_stderr(tee):
                try:
                    run(report, argv)
                except BaseException as exc:  # the probe's own bug, or an exit from inside a framework
                    report["probe_error"] = error_record("probe", exc)
        report["warnings"] = [
            {"category": w.category.__name__, "message": _clip(w.message), "source": "%s:%s" % (w.filename, w.lineno)}
            for w in caught
        ]
    except BaseException as exc:
        report["probe_error"] = error_record("probe", exc)
    report["stderr"] = tee.text()
    out.write(json.dumps(_json_safe(report), sort_keys=True))
    out.write("\n")
    out.flush()
    if _STUCK:  # a collective still hangs in its thread: do not wait for it (or for the framework's teardown)
        sys.stderr.flush()
        os._exit(0)
    return 0


def _json_safe(value):
    """Plain JSON: no NaN or infinity (strict parsers reject them), no objects a framework slipped in."""
    if isinstance(value, dict):
        return dict((str(k), _json_safe(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float):
        return value if _finite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
