"""--multi-gpu, shared by the frameworks: the report of a collective, its bandwidth, its sum checked, and the
deadline after which a stuck all-reduce becomes an error of the report."""

import sys
import threading

from .record import error_record, skipped

MULTI_GPU_BYTES = 64 * 2 ** 20  # what each GPU contributes to the timed all-reduce
MULTI_GPU_CHECK_ELEMENTS = 1024  # the all-reduce whose sum is checked: float32 values, replica/rank r gives r + 1
MULTI_GPU_ITERATIONS = 20
MULTI_GPU_TIMEOUT = 240.0  # seconds; the probe's --multi-gpu-timeout=SECONDS changes it


def too_few_gpus(framework, count):
    return skipped("needs at least 2 GPUs; this machine has %d (visible to %s)" % (count, framework))


# Threads of a collective that did not finish in time: main() exits without waiting for them once the JSON is out.
STUCK = []
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
    STUCK.append(thread)
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


def check_rank_sum(out, values):
    """Across nodes: whether ``values``, this rank's copy of the summed check tensor (rank r gave r + 1), is the
    expected sum, recorded in the rank's result ``out``."""
    wrong = first_wrong(values, out["expected"], MULTI_GPU_CHECK_ELEMENTS)
    out["correct"] = wrong is None
    out["got"] = values[0] if values else None
    if wrong is not None:
        out["error"] = {"where": "all_reduce", "type": "WrongResult", "traceback": "",
                        "message": "the all-reduce sum is wrong on rank %d: every value should be %g, got %r"
                        % (out["rank"], out["expected"], wrong)}


def enter_phase(out, phase):
    """Across nodes: this rank enters ``phase`` (rendezvous, all_reduce, pairs), said on stderr before it starts,
    for a worker that is cut off or aborted there (JAX ends the process when the coordinator does not answer):
    where it was and, for the rendezvous, by which route."""
    out["phase"] = phase
    if phase == "rendezvous":
        line = "rendezvous %s:%d from %s on %s" % (out["address"], out["port"], out["local_address"], out["interface"])
    else:
        line = phase
    sys.stderr.write("envkit-cross-node: %s\n" % line)
    sys.stderr.flush()
