"""Shared by the stand-in frameworks of envkit's probe tests: their switches, and pure-Python arithmetic.

The stand-ins (torch, tensorflow, jax, mxnet in this directory) are installed into a throw-away venv together with
this module and a fake_config.json that the test writes; they read their switches from it. They must stay valid on
Python 3.6, like the probe itself. Nothing here is a real framework: it only behaves like the parts of their APIs
the probe calls, including the messages the real ones give when things go wrong.
"""

import json
import math
import os
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def config(framework):
    with open(os.path.join(HERE, "fake_config.json")) as handle:
        return json.load(handle).get(framework, {})


def configured():
    """Whether the stand-ins' switches are here (a stand-in companion beside the real torch may have none)."""
    return os.path.exists(os.path.join(HERE, "fake_config.json"))


def matmul(a, b):
    columns = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, column)) for column in columns] for row in a]


def conv_nchw(x, w):
    """[N][C][H][W] x [K][C][kh][kw] -> [N][K][H-kh+1][W-kw+1] (valid cross-correlation)."""
    out = []
    for image in x:
        planes = []
        for kernel in w:
            kh, kw = len(kernel[0]), len(kernel[0][0])
            height, width = len(image[0]) - kh + 1, len(image[0][0]) - kw + 1
            planes.append([[sum(image[c][y + dy][x0 + dx] * kernel[c][dy][dx]
                                for c in range(len(image)) for dy in range(kh) for dx in range(kw))
                            for x0 in range(width)] for y in range(height)])
        out.append(planes)
    return out


def nhwc_to_nchw(x):
    return [[[[image[y][x0][c] for x0 in range(len(image[0]))] for y in range(len(image))]
             for c in range(len(image[0][0]))] for image in x]


def nchw_to_nhwc(x):
    return [[[[image[c][y][x0] for c in range(len(image))] for x0 in range(len(image[0][0]))]
             for y in range(len(image[0]))] for image in x]


def hwio_to_oihw(w):
    kh, kw, cin, cout = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    return [[[[w[y][x][c][k] for x in range(kw)] for y in range(kh)] for c in range(cin)] for k in range(cout)]


def perturb(values, amount=0.5):
    """A wrong result: what a miscompiled kernel or a failing GPU gives."""
    if isinstance(values, list):
        return [perturb(v, amount) for v in values]
    return values + amount


def tf32(values):
    """Nested lists with every value rounded to TF32's 10 bits of mantissa."""
    if isinstance(values, list):
        return [tf32(value) for value in values]
    mantissa, exponent = math.frexp(values)
    return math.ldexp(round(mantissa * 2048) / 2048.0, exponent)


def covered(arch_list, capability):
    """Whether an arch list ('sm_80', 'compute_90') has code for a (major, minor) GPU."""
    major, minor = capability
    for entry in arch_list:
        kind, _, digits = entry.partition("_")
        code = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and code[0] == major and code[1] <= minor:
            return True
        if kind == "compute" and code <= (major, minor):
            return True
    return False


class HostArray(object):
    """What .numpy() / .asnumpy() / device_get return: only tolist() is used."""

    def __init__(self, values):
        self.values = values

    def tolist(self):
        return self.values


def take_time(cfg, kind, amount, count=1):
    """The time model some tests switch on: ``cfg["busbw_gbs"]`` makes an all-reduce of ``amount`` bytes per device
    over ``count`` devices take as long as a ring all-reduce at that bus bandwidth; ``cfg["tflops"]`` makes a product
    of ``amount`` floating-point operations take as long as it would at that speed. Off (no wait) by default."""
    if kind == "all-reduce" and cfg.get("busbw_gbs"):
        time.sleep(2.0 * (count - 1) / count * amount / (cfg["busbw_gbs"] * 1e9))
    elif kind == "matmul" and cfg.get("tflops"):
        time.sleep(amount / (cfg["tflops"] * 1e12))


class Exchange(object):
    """Where the replicas (devices) of one multi-GPU call meet for each all-reduce."""

    def __init__(self, count):
        self.barrier = threading.Barrier(count)
        self.slots = [None] * count

    def gather(self, position, value):
        """Every replica's value, once all have given theirs."""
        self.slots[position] = value
        self.barrier.wait(60)  # every replica has given its part
        parts = list(self.slots)
        self.barrier.wait(60)  # every replica has read them: the slots can take the next all-reduce
        return parts


def run_replicas(count, exchange, body):
    """body(position) on one thread per replica, as a multi-GPU call runs; the results, or a replica's own error
    (not the others' "the barrier was broken")."""
    results, failures = [None] * count, [None] * count

    def run(position):
        try:
            results[position] = body(position)
        except BaseException as exc:
            failures[position] = exc
            exchange.barrier.abort()  # the others stop waiting for this one

    threads = [threading.Thread(target=run, args=(position,)) for position in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    raised = [f for f in failures if f is not None]
    if raised:
        raise ([f for f in raised if not isinstance(f, threading.BrokenBarrierError)] or raised)[0]
    return results
