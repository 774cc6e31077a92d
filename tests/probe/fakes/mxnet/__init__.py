"""Stand-in for MXNet 1.x (see fakearray.py). Switches, under "mxnet" in fake_config.json:

version, cuda (None: built without CUDA), gpus [{name, capability, memory}], wrong_results [GPU indices],
import_error ("undefined-symbol"). The test installs dist-info for mxnet-cuXYZ next to it.
"""

import types

import fakearray

_cfg = fakearray.config("mxnet")
if _cfg.get("import_error") == "undefined-symbol":
    raise OSError("/env/lib/python3.8/site-packages/mxnet/libmxnet.so: undefined symbol: cudnnGetVersion")

__version__ = _cfg.get("version", "1.9.1")
_CUDA = _cfg.get("cuda", "11.2")
_GPUS = _cfg.get("gpus", []) if _CUDA else []


class _Features(object):
    def is_enabled(self, name):
        return bool(_CUDA) and name in ("CUDA", "CUDNN")


runtime = types.SimpleNamespace(Features=_Features)
context = types.SimpleNamespace(
    num_gpus=lambda: len(_GPUS),
    gpu_memory_info=lambda index: (2 ** 30, _GPUS[index].get("memory", 16 * 2 ** 30)),
)


def cpu(index=0):
    return ("cpu", index)


def gpu(index=0):
    if index >= len(_GPUS):
        raise RuntimeError("[fake] Check failed: e == cudaSuccess: invalid device ordinal")
    return ("gpu", index)


class NDArray(object):
    def __init__(self, values, ctx):
        self.values, self.ctx = values, ctx

    def asnumpy(self):
        return fakearray.HostArray(self.values)


def _effects(ctx, values):
    if ctx[0] == "gpu" and ctx[1] in _cfg.get("wrong_results", []):
        return fakearray.perturb(values)
    return values


def _array(values, ctx=None, dtype=None):
    return NDArray(values, ctx or cpu())


def _dot(a, b):
    return NDArray(_effects(a.ctx, fakearray.matmul(a.values, b.values)), a.ctx)


def _convolution(data=None, weight=None, no_bias=True, kernel=None, num_filter=None):
    return NDArray(_effects(data.ctx, fakearray.conv_nchw(data.values, weight.values)), data.ctx)


nd = types.SimpleNamespace(array=_array, dot=_dot, Convolution=_convolution)
