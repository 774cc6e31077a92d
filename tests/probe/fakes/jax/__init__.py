"""Stand-in for JAX (see fakearray.py). Switches, under "jax" in fake_config.json:

version, cuda (None: no CUDA plugin, CPU only), gpus [{name, capability}], wrong_results [GPU indices],
oom [GPU indices: allocating a big array there fails, as on a full GPU],
collective ("wrong": one GPU gets a wrong psum; "raise": the psum fails with NCCL's error; "hang": it never
returns),
busbw_gbs and tflops (how long psums and big products take: see fakearray.take_time),
tf32 (float32 products on GPUs round their inputs to TF32 unless asked for Precision.HIGHEST, as XLA does on an H100),
backend_error (the CUDA backend does not start: asking for the GPUs raises JAX's "Unable to initialize backend 'cuda'"
with this text; the plugin is installed, so it is still a GPU build).
The test installs dist-info for jax, jaxlib and (with cuda) jax-cuda12-plugin next to it.

jax.pmap runs the function once per device, in threads, like SPMD code runs on every GPU at once, and
jax.lax.psum really waits for every device and sums what they gave. jax.jit only calls the function (nothing is
compiled). Big arrays (the benchmark's matrices, the all-reduce buffer) are a shape and one value, like the torch
stand-in's; only the time of what is done with them matters.
"""

import threading
import time
import types
import warnings

import fakearray

_cfg = fakearray.config("jax")
__version__ = _cfg.get("version", "0.4.30")
_GPUS = _cfg.get("gpus", []) if _cfg.get("cuda", "12.3") and not _cfg.get("backend_error") else []
_CPU = types.SimpleNamespace(platform="cpu", device_kind="cpu", id=0)
_DEVICES = [types.SimpleNamespace(platform="gpu", device_kind=g["name"], id=i,
                                  compute_capability="%d.%d" % tuple(g["capability"]))
            for i, g in enumerate(_GPUS)]
_BIG = 2 ** 20  # elements from which an array counts as big (a shape and a fill value)
_local = threading.local()  # in a pmap thread: its device and its place on the mapped axis
if not _cfg.get("cuda", "12.3") and _cfg.get("gpus"):
    warnings.warn("An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
                  "Falling back to cpu.", UserWarning)


class XlaRuntimeError(RuntimeError):
    pass


def default_backend():
    return "gpu" if _DEVICES else "cpu"


def devices(backend=None):
    if backend is None:
        return list(_DEVICES) or [_CPU]
    if backend == "cpu":
        return [_CPU]
    if backend in ("gpu", "cuda") and _DEVICES:
        return list(_DEVICES)
    if backend in ("gpu", "cuda") and _cfg.get("backend_error"):
        raise RuntimeError("Unable to initialize backend 'cuda': %s (you may need to uninstall the failing plugin "
                           "package, or set JAX_PLATFORMS=cpu to skip this backend.)" % _cfg["backend_error"])
    raise RuntimeError("Unknown backend: '%s' requested, but no platforms that are instances of %s are present. "
                       "Platforms present are: cpu" % (backend, backend))


def _current_device():
    return getattr(_local, "device", None) or devices()[0]


class Array(object):
    """Nested lists (``values``), a ``shape`` and one ``fill`` value (big arrays and scalars), or the ``shards`` of
    a pmap's result (one array per device)."""

    def __init__(self, values=None, device=None, shape=None, fill=None, shards=None, dtype="float32"):
        self.values, self.fill, self.shards, self.dtype = values, fill, shards, dtype
        self.shape = tuple(shape) if shape is not None else None
        self.device = device or _current_device()
        if self.shape is not None and _size(self.shape) >= _BIG and self.device.platform == "gpu" \
                and self.device.id in _cfg.get("oom", []):
            raise XlaRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate %d bytes."
                                  % (_size(self.shape) * (2 if dtype == "float16" else 4)))

    def tolist(self):
        if self.shards is not None:
            return [shard.tolist() for shard in self.shards]
        if self.values is not None:
            return self.values

        def build(shape):
            return [build(shape[1:]) for _ in range(shape[0])] if shape else self.fill
        return build(list(self.shape))

    def block_until_ready(self):
        return self


def _size(shape):
    total = 1
    for dim in shape:
        total *= dim
    return total


def device_put(x, device=None):
    return Array(x.values, device or devices()[0], shape=x.shape, fill=x.fill, dtype=x.dtype)


def device_get(x):
    return fakearray.HostArray(x.tolist())


def _effects(array, values):
    device = array.device
    if device.platform == "gpu" and device.id in _cfg.get("wrong_results", []):
        return fakearray.perturb(values)
    return values


def _conv(lhs, rhs, window_strides, padding):
    return Array(_effects(lhs, fakearray.conv_nchw(lhs.values, rhs.values)), lhs.device)


def jit(fun, **kwargs):
    return fun


# --- jax.pmap and jax.lax.psum -------------------------------------------------------------------------------------

def _psum(x, axis_name):
    axis = getattr(_local, "axis", None)
    if axis is None or axis[0] != axis_name:
        raise NameError("unbound axis name: %s" % (axis_name,))
    name, position, count, exchange = axis
    if _cfg.get("collective") == "hang":
        time.sleep(3600)  # what NCCL does where peer-to-peer transfers are broken
    if _cfg.get("collective") == "raise":
        raise XlaRuntimeError("INTERNAL: NCCL operation ncclAllReduce(send_buffer, recv_buffer, ...) failed: "
                              "unhandled cuda error (run with NCCL_DEBUG=INFO for details)")
    parts = exchange.gather(position, x)
    if any(p.values is not None or p.shards is not None or p.shape != x.shape for p in parts):
        raise NotImplementedError("the stand-in sums arrays made by jnp.full, of one shape")
    fakearray.take_time(_cfg, "all-reduce", _size(x.shape) * 4, count)
    total = sum(p.fill for p in parts)
    if _cfg.get("collective") == "wrong" and position == count - 1:
        total = fakearray.perturb(total)
    return Array(shape=x.shape, fill=total, dtype=x.dtype)


def _split(x, count):
    """The per-device parts of a pmap's argument, along its leading axis."""
    if x.shards is not None:
        parts = list(x.shards)
    elif x.values is not None:
        parts = [Array(shape=(), fill=v, device=x.device, dtype=x.dtype) if not isinstance(v, list)
                 else Array(v, x.device, dtype=x.dtype) for v in x.values]
    else:
        parts = [Array(shape=x.shape[1:], fill=x.fill, device=x.device, dtype=x.dtype)
                 for _ in range(x.shape[0] if x.shape else 0)]
    if len(parts) != count:
        raise ValueError("pmap got an argument with leading axis %d for %d devices" % (len(parts), count))
    return parts


def pmap(fun, axis_name=None, devices=None, **kwargs):
    mapped_devices = list(devices) if devices is not None else list(_DEVICES) or [_CPU]

    def mapped(*args):
        count = len(mapped_devices)
        parts = [_split(arg, count) for arg in args]
        exchange = fakearray.Exchange(count)

        def run(position):
            _local.device = mapped_devices[position]
            _local.axis = (axis_name, position, count, exchange)
            try:
                return fun(*[device_put(p[position], mapped_devices[position]) for p in parts])
            finally:
                _local.device = _local.axis = None

        results = fakearray.run_replicas(count, exchange, run)
        return Array(shards=results, device=mapped_devices[0], dtype=results[0].dtype)

    return mapped


lax = types.SimpleNamespace(conv=_conv, psum=_psum, Precision=types.SimpleNamespace(DEFAULT="DEFAULT", HIGHEST="HIGHEST"))


# --- jax.random ------------------------------------------------------------------------------------------------------

def _prng_key(seed):
    return Array([0, int(seed)], dtype="uint32")


def _normal(key, shape=(), dtype="float32"):
    return Array(shape=shape, fill=0.5, device=key.device, dtype=dtype)  # one value stands for random ones


random = types.SimpleNamespace(PRNGKey=_prng_key, normal=_normal)
