"""The computations every framework's probe runs, and their comparison with a reference: pure Python on the CPU, the
framework's own CPU product for each GPU."""

import time

from .record import error_record, finite

CPU_N = 24  # the CPU product is checked against a pure-Python one, so it stays small
GPU_N = 64  # each GPU's product is checked against the framework's own CPU product
TOLERANCE = 1e-2  # relative to the size of the values: TF32 convolutions stay far below it, wrong kernels far above


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
        if not finite(g):
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

