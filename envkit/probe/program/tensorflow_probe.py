"""The probe of TensorFlow (1.x graphs and 2.x eager): its build, its GPUs, the checks on each (placed on that GPU,
or an error says where they ran); --multi-gpu as a MirroredStrategy all-reduce; --bench."""

import re
import time

from .bench import BENCH_N, bench_runs, timed_products
from .checks import CPU_N, GPU_N, conv_inputs, matrix, py_conv2d, py_matmul, run_check
from .collective import (MULTI_GPU_BYTES, MULTI_GPU_CHECK_ELEMENTS, MULTI_GPU_ITERATIONS, MULTI_GPU_TIMEOUT, STUCK,
                         STUCK_GPUS, collective_result, collective_within_deadline, first_wrong, set_bandwidth,
                         too_few_gpus, wrong_sum)
from .record import as_text, error_record, skipped

def probe_tensorflow(report, recorder, options):
    import tensorflow as tf

    report["version"] = str(getattr(tf, "__version__", None) or getattr(tf, "VERSION", "unknown"))
    info = {}
    sysconfig = getattr(tf, "sysconfig", None)
    if sysconfig is not None and hasattr(sysconfig, "get_build_info"):
        info = dict(recorder.guarded("tf.sysconfig.get_build_info", sysconfig.get_build_info, {}) or {})
    report["build_info"] = dict((str(k), as_text(v) if not isinstance(v, (list, bool)) else v) for k, v in info.items())
    gpu_build = info.get("is_cuda_build")
    if gpu_build is None:
        gpu_build = recorder.guarded("tf.test.is_built_with_cuda", tf.test.is_built_with_cuda, False)
    report["gpu_build"] = bool(gpu_build)
    report["cuda"] = as_text(info.get("cuda_version")) if gpu_build else None
    report["cudnn"] = as_text(info.get("cudnn_version")) if gpu_build else None
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
        report["bench"] = skipped(STUCK_GPUS) if STUCK else tf_bench(recorder, tf, len(gpus), eager)


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
        places = [re.search(r"GPU:([0-9]+)$", str(t.device).upper()) for t in sums]
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
        capability = re.search(r"compute capability: ([0-9]+\.[0-9]+)", description)
        gpus.append({
            "index": len(gpus),
            "name": name.group(1).strip() if name else "GPU %d" % len(gpus),
            "compute_capability": capability.group(1) if capability else None,
            "memory_mib": int(getattr(device, "memory_limit", 0)) // 2 ** 20 or None,
        })
    return gpus

