"""--bench, shared by the frameworks: matrix products timed on each GPU, in each type of BENCH_DTYPES."""

import time

from .record import error_record, skipped

BENCH_SECONDS = 0.5
BENCH_N = 4096  # the benchmark multiplies two BENCH_N x BENCH_N matrices
BENCH_DTYPES = ("float32", "float16")


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

