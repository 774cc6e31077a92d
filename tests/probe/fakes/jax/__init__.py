"""Stand-in for JAX (see fakearray.py). Switches, under "jax" in fake_config.json:

version, cuda (None: no CUDA plugin, CPU only), gpus [{name, capability}], wrong_results [GPU indices].
The test installs dist-info for jax, jaxlib and (with cuda) jax-cuda12-plugin next to it.
"""

import types
import warnings

import fakearray

_cfg = fakearray.config("jax")
__version__ = _cfg.get("version", "0.4.30")
_GPUS = _cfg.get("gpus", []) if _cfg.get("cuda", "12.3") else []
_CPU = types.SimpleNamespace(platform="cpu", device_kind="cpu", id=0)
_DEVICES = [types.SimpleNamespace(platform="gpu", device_kind=g["name"], id=i,
                                  compute_capability="%d.%d" % tuple(g["capability"]))
            for i, g in enumerate(_GPUS)]
if not _cfg.get("cuda", "12.3") and _cfg.get("gpus"):
    warnings.warn("An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
                  "Falling back to cpu.", UserWarning)


def default_backend():
    return "gpu" if _DEVICES else "cpu"


def devices(backend=None):
    if backend is None:
        return list(_DEVICES) or [_CPU]
    if backend == "cpu":
        return [_CPU]
    if backend in ("gpu", "cuda") and _DEVICES:
        return list(_DEVICES)
    raise RuntimeError("Unknown backend: '%s' requested, but no platforms that are instances of %s are present. "
                       "Platforms present are: cpu" % (backend, backend))


class Array(object):
    def __init__(self, values, device):
        self.values, self.device = values, device


def device_put(x, device=None):
    return Array(x.values, device or devices()[0])


def device_get(x):
    return fakearray.HostArray(x.values)


def _effects(array, values):
    device = array.device
    if device.platform == "gpu" and device.id in _cfg.get("wrong_results", []):
        return fakearray.perturb(values)
    return values


def _conv(lhs, rhs, window_strides, padding):
    return Array(_effects(lhs, fakearray.conv_nchw(lhs.values, rhs.values)), lhs.device)


lax = types.SimpleNamespace(conv=_conv)
