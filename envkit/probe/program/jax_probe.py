"""The probe of JAX: its build (jaxlib and its CUDA plugin), its GPUs, the checks on each; --multi-gpu as a psum
under jax.pmap; --bench."""

import time

from .bench import BENCH_N, bench_runs, timed_products
from .checks import CPU_N, GPU_N, conv_inputs, flatten, matrix, py_conv2d, py_matmul, run_check
from .collective import (MULTI_GPU_BYTES, MULTI_GPU_CHECK_ELEMENTS, MULTI_GPU_ITERATIONS, MULTI_GPU_TIMEOUT, STUCK,
                         STUCK_GPUS, collective_result, collective_within_deadline, first_wrong, set_bandwidth,
                         too_few_gpus, wrong_sum)
from .record import as_text, cuda_text, distributions, error_record, skipped

# Float32 products that differ from Precision.HIGHEST's by more than this (relative to the largest value) were made
# from rounded inputs. On an H100 (jax 0.11.2), 64x64 products at XLA's default precision were 0.2% apart (TF32);
# float32 ones agree to about 1e-7.
TF32_DIFFERENCE = 1e-5

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
        report["bench"] = skipped(STUCK_GPUS) if STUCK else jax_bench(recorder, jax, jnp, found)


# Run on one H100 (jax 0.11.2 with jax-cuda13-plugin, issue 15): jax_bench, and jax_multi_gpu's psum with its
# two-GPU guard lowered (a world of one). Not yet run on two GPUs or more: there, only against tests/probe/fakes/jax.

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


def jax_bench(recorder, jax, jnp, gpus):
    """Matrix products on each GPU for about BENCH_SECONDS: achieved TFLOP/s in float32 and float16. "tf32": whether
    the float32 products were TF32 ones (XLA's default precision on Ampere and newer GPUs: 381 TFLOP/s on an H100,
    where torch's float32 made 52), measured on the first GPU by jax_tf32."""
    product = jax.jit(jnp.dot)

    def one(index, dtype_name):
        dtype = getattr(jnp, dtype_name)
        device = gpus[index]
        # Inputs made on the GPU itself: the random numbers follow their key, committed to that device.
        a = jax.random.normal(jax.device_put(jax.random.PRNGKey(2 * index), device), (BENCH_N, BENCH_N), dtype=dtype)
        b = jax.random.normal(jax.device_put(jax.random.PRNGKey(2 * index + 1), device), (BENCH_N, BENCH_N),
                              dtype=dtype)
        return timed_products(lambda: product(a, b), lambda out: out.block_until_ready(), BENCH_N)

    result = bench_runs("jax", ["%s:%d" % (getattr(d, "platform", "gpu"), getattr(d, "id", i))
                                for i, d in enumerate(gpus)], one)
    if result.get("runs"):
        result["tf32"] = recorder.guarded("jax float32 precision", lambda: jax_tf32(jax, jnp, gpus[0]))
    return result


def jax_tf32(jax, jnp, device):
    """Whether float32 products on ``device`` round their inputs to TF32 (or coarser): the default product of two
    GPU_N x GPU_N matrices against the one at Precision.HIGHEST (JAX's setting and XLA's flags decide, per GPU
    generation, so it is measured, not read)."""
    a, b = [jax.device_put(jnp.asarray(matrix(GPU_N, GPU_N, seed), dtype=jnp.float32), device) for seed in (5, 6)]
    fast = flatten(jax.device_get(jnp.dot(a, b)).tolist())
    exact = flatten(jax.device_get(jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)).tolist())
    scale = max([abs(value) for value in exact] or [0.0]) or 1.0
    return max(abs(f - e) for f, e in zip(fast, exact)) / scale > TF32_DIFFERENCE


def _jax_cuda_versions():
    from jax._src.lib import cuda_versions  # present when a CUDA plugin is installed

    if cuda_versions is None:
        return {}
    return {"cuda": cuda_text(cuda_versions.cuda_runtime_get_version()),
            "cudnn": as_text(cuda_versions.cudnn_get_version())}

