"""Stand-in for PyTorch (see fakearray.py). Switches, under "torch" in fake_config.json:

version, cuda (None: a CPU build), hip (a ROCm build: its HIP version, with cuda None), cudnn, gpus [{name,
capability: [major, minor], memory}] (a ROCm build's: {name, gfx: "gfx90a:sramecc+:xnack-", memory}), arch_list,
no_kfd (a ROCm build on a machine whose /dev/kfd this user may not open: HIP's message, no GPU),
driver_found (e.g. 11020: the driver is too old), wrong_results [GPU indices], oom [GPU indices],
import_error ("numpy2", "missing-library", "exit"), hang ("is_available", "import"), stdout_noise, nccl,
before_1_6 (the API of torch < 1.6: no torch.cuda.get_arch_list, no torch._C._cuda_getArchFlags).
CUDA_VISIBLE_DEVICES is honoured like CUDA does: a list of indices, cut at the first invalid entry.
"""

import builtins
import os
import sys
import time
import types
import warnings

import fakearray

_cfg = fakearray.config("torch")

if _cfg.get("stdout_noise"):
    os.write(1, b"noise a C extension writes to file descriptor 1\n")
    print("noise printed at import")
if _cfg.get("hang") == "import":
    time.sleep(3600)
_failure = _cfg.get("import_error")
if _failure == "numpy2":
    sys.stderr.write(
        "\nA module that was compiled using NumPy 1.x cannot be run in\n"
        "NumPy 2.0.2 as it may crash. To support both 1.x and 2.x\n"
        "versions of NumPy, modules must be compiled with NumPy 2.0.\n"
        "Some module may need to rebuild instead e.g. with 'pybind11>=2.12'.\n")
    raise ImportError("numpy.core.multiarray failed to import")
if _failure == "missing-library":
    raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")
if _failure == "exit":
    sys.exit(3)

__version__ = _cfg.get("version", "2.5.1+cu121")
float32 = "float32"
float16 = "float16"
version = types.SimpleNamespace(cuda=_cfg.get("cuda", "12.1"), hip=_cfg.get("hip"))
if version.hip:
    version.cuda = None  # a ROCm build has no CUDA
_GPUS = [] if _cfg.get("no_kfd") else _cfg.get("gpus", [])
_ARCH = _cfg.get("arch_list", ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])
# What HIP prints when /dev/kfd cannot be opened (the user is not in the render group), and when a GPU's target has no
# code in the build (ROCm's "no kernel image" is HIP's invalid device function / hipErrorNoBinaryForGpu).
_NO_KFD = "Unable to open /dev/kfd read-write: Permission denied"
_NO_BINARY = ("HIP error: invalid device function\nHIP kernel errors might be asynchronously reported at some other API "
              "call, so the stacktrace below might be incorrect.")
_DRIVER = ("The NVIDIA driver on your system is too old (found version %d). Please update your GPU driver by "
           "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
           "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
           "version of the CUDA driver.")
_NO_KERNEL = ("CUDA error: no kernel image is available for execution on the device\n"
              "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.")
_warned = set()


def _visible():
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return list(_GPUS)
    out = []
    for part in cvd.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) >= len(_GPUS):
            break
        out.append(_GPUS[int(part)])
    return out


def _built_for_gpus():
    return bool(version.cuda or version.hip)


def _usable():
    return _built_for_gpus() and not _cfg.get("driver_found") and bool(_visible())


def _gpu(index):
    gpus = _visible() if _usable() else []
    if index >= len(gpus):
        raise RuntimeError("CUDA error: invalid device ordinal")
    gpu = gpus[index]
    if version.hip:
        return gpu
    capability = tuple(gpu["capability"])
    if not fakearray.covered(_ARCH, capability) and index not in _warned:
        _warned.add(index)
        warnings.warn(
            "\n%s with CUDA capability sm_%d%d is not compatible with the current PyTorch installation.\n"
            "The current PyTorch install supports CUDA capabilities %s.\n" % (gpu["name"], capability[0], capability[1],
                                                                             " ".join(_ARCH)), UserWarning)
    return gpu


class _Cuda(object):
    @staticmethod
    def is_available():
        if _cfg.get("hang") == "is_available":
            time.sleep(3600)
        if _cfg.get("no_kfd"):
            sys.stderr.write(_NO_KFD + "\n")
            return False
        if not _built_for_gpus():
            return False
        if _cfg.get("driver_found"):
            warnings.warn("CUDA initialization: " + _DRIVER % _cfg["driver_found"], UserWarning)
            return False
        return bool(_visible())

    @staticmethod
    def device_count():
        return len(_visible()) if _usable() else 0

    @staticmethod
    def init():
        if _cfg.get("no_kfd"):
            raise RuntimeError("No HIP GPUs are available")
        if not _built_for_gpus():
            raise AssertionError("Torch not compiled with CUDA enabled")
        if _cfg.get("driver_found"):
            raise RuntimeError(_DRIVER % _cfg["driver_found"])
        if not _visible():
            raise RuntimeError("No CUDA GPUs are available")

    @staticmethod
    def get_arch_list():
        return list(_ARCH) if _usable() else []

    @staticmethod
    def get_device_name(index=0):
        return _gpu(index)["name"]

    @staticmethod
    def get_device_capability(index=0):
        return tuple(_gpu(index)["capability"])

    @staticmethod
    def get_device_properties(index=0):
        gpu = _gpu(index)
        return types.SimpleNamespace(name=gpu["name"], total_memory=gpu.get("memory", 16 * 2 ** 30),
                                     gcnArchName=gpu.get("gfx"))

    @staticmethod
    def synchronize(index=None):
        pass

    @staticmethod
    def set_device(index):
        _gpu(index)


if _cfg.get("before_1_6"):
    del _Cuda.get_arch_list  # torch 1.6 added it (and torch._C._cuda_getArchFlags, which _C below never has)
cuda = _Cuda()
backends = types.SimpleNamespace(
    cudnn=types.SimpleNamespace(version=lambda: _cfg.get("cudnn", 90100) if version.cuda else None,
                                is_available=lambda: bool(version.cuda), enabled=True),
    cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)),
)
_C = types.SimpleNamespace()


def device(kind, index=None):
    return kind if index is None else "%s:%d" % (kind, index)


class Tensor(object):
    """Nested lists on a device, or (for the big buffers of the benchmark and the all-reduce) a shape and a fill."""

    def __init__(self, data=None, shape=None, fill=None, device="cpu"):
        self.data, self.shape, self.fill, self.device = data, shape, fill, str(device)

    def to(self, device):
        device = str(device)
        if device.startswith("cuda"):
            if not _built_for_gpus():
                raise AssertionError("Torch not compiled with CUDA enabled")
            if _cfg.get("driver_found"):
                raise RuntimeError(_DRIVER % _cfg["driver_found"])
            _gpu(int(device.partition(":")[2] or 0))
        return Tensor(self.data, self.shape, self.fill, device)

    def cpu(self):
        return self.to("cpu")

    def tolist(self):
        if self.data is not None:
            return self.data
        def build(shape):
            return [build(shape[1:]) for _ in range(shape[0])] if shape else self.fill
        return build(list(self.shape))

    def __eq__(self, other):
        values = [self.fill] if self.data is None else list(_flat(self.data))
        return _Scalar(builtins.all(v == other for v in values))


class _Scalar(object):
    def __init__(self, value):
        self.value = value

    def item(self):
        return self.value


def _flat(values):
    for value in values:
        if isinstance(value, list):
            for inner in _flat(value):
                yield inner
        else:
            yield value


def all(value):  # noqa: A001 - torch.all
    return value


def _index(t):
    return int(t.device.partition(":")[2] or 0) if t.device.startswith("cuda") else None


def _gpu_effects(t, values):
    index = _index(t)
    if index is None:
        return values
    gpu = _gpu(index)
    if version.hip:
        if gpu["gfx"].split(":")[0] not in _ARCH:
            raise RuntimeError(_NO_BINARY)
    elif not fakearray.covered(_ARCH, tuple(gpu["capability"])):
        raise RuntimeError(_NO_KERNEL)
    if index in _cfg.get("oom", []):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU %d; 79.15 GiB total capacity; "
                           "78.90 GiB already allocated; 3.19 MiB free)" % index)
    if index in _cfg.get("wrong_results", []) and values is not None:
        return fakearray.perturb(values)
    return values


def _same_device(a, b):
    if a.device != b.device:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices, %s and %s!"
                           % (a.device, b.device))


def tensor(values, dtype=None, device=None):
    return Tensor(data=values, device=device or "cpu")


def randn(*shape, **kwargs):
    return Tensor(shape=shape, fill=0.5, device=kwargs.get("device") or "cpu")


def zeros(*shape, **kwargs):
    shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
    return Tensor(shape=tuple(shape), fill=0.0, device=kwargs.get("device") or "cpu")


def full(shape, value, **kwargs):
    return Tensor(shape=tuple(shape), fill=float(value), device=kwargs.get("device") or "cpu")


def matmul(a, b):
    _same_device(a, b)
    if a.data is None or b.data is None:  # the benchmark's matrices: only the time matters
        _gpu_effects(a, None)
        return Tensor(shape=(a.shape[0], b.shape[1]), fill=0.0, device=a.device)
    return Tensor(data=_gpu_effects(a, fakearray.matmul(a.data, b.data)), device=a.device)


def _conv2d(x, w):
    _same_device(x, w)
    return Tensor(data=_gpu_effects(x, fakearray.conv_nchw(x.data, w.data)), device=x.device)


nn = types.SimpleNamespace(functional=types.SimpleNamespace(conv2d=_conv2d))
