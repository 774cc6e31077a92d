"""The probe of MXNet (retired): its build, its GPUs and the checks on each; --multi-gpu and --bench are not built
for it and say so."""

import re

from .checks import CPU_N, GPU_N, conv_inputs, matrix, py_conv2d, py_matmul, run_check
from .record import distributions, skipped

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
    variant = [re.match(r"mxnet-cu([0-9]+)([0-9])$", name) for name in dists]
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


def skip_retired_options(report, options, framework):
    """--multi-gpu and --bench are built for torch, tensorflow and jax; not for a retired framework (MXNet)."""
    why = "not built for %s, a retired framework (built for torch, tensorflow and jax)" % framework
    if options["multi_gpu"]:
        report["multi_gpu"] = skipped(why)
    if options["bench"]:
        report["bench"] = skipped(why)
