"""Stand-in for TensorFlow 2 in eager mode (see fakearray.py). Switches, under "tensorflow" in fake_config.json:

version, cuda (None: a CPU build), gpus [{name, capability}], arch_list, wrong_results [GPU indices],
import_error ("missing-library").
"""

import contextlib
import types

import fakearray

_cfg = fakearray.config("tensorflow")
if _cfg.get("import_error") == "missing-library":
    raise ImportError("libcudart.so.11.0: cannot open shared object file: No such file or directory")

__version__ = _cfg.get("version", "2.15.0")
float32 = "float32"
_GPUS = _cfg.get("gpus", [])
_CUDA = _cfg.get("cuda", "12.2")
_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_placement = [_CPU]


def _build_info():
    info = {"is_cuda_build": bool(_CUDA), "is_rocm_build": False, "is_tensorrt_build": False}
    if _CUDA:
        info.update(cuda_version=_CUDA, cudnn_version="8",
                    cuda_compute_capabilities=_cfg.get("arch_list", ["sm_60", "sm_70", "sm_80", "compute_90"]))
    return info


sysconfig = types.SimpleNamespace(get_build_info=_build_info)
test = types.SimpleNamespace(is_built_with_cuda=lambda: bool(_CUDA))


def executing_eagerly():
    return True


class PhysicalDevice(object):
    def __init__(self, index):
        self.name = "/physical_device:GPU:%d" % index
        self.device_type = "GPU"
        self.index = index


def _list_physical_devices(kind=None):
    gpus = [PhysicalDevice(i) for i in range(len(_GPUS))] if _CUDA else []
    return gpus if kind == "GPU" else [PhysicalDevice(-1)] + gpus


def _details(device):
    gpu = _GPUS[device.index]
    return {"device_name": gpu["name"], "compute_capability": tuple(gpu["capability"])}


config = types.SimpleNamespace(
    list_physical_devices=_list_physical_devices,
    experimental=types.SimpleNamespace(set_memory_growth=lambda device, enable: None, get_device_details=_details),
)


@contextlib.contextmanager
def device(name):
    kind, _, number = name.strip("/").partition(":")
    if kind.upper() == "GPU" and int(number) < len(_GPUS) and _CUDA:
        _placement.append("/job:localhost/replica:0/task:0/device:GPU:%s" % number)
    else:  # soft placement: what TF 2 does with a device it does not have
        _placement.append(_CPU)
    try:
        yield
    finally:
        _placement.pop()


class EagerTensor(object):
    def __init__(self, values):
        self.values = values
        self.device = _placement[-1]

    def numpy(self):
        return fakearray.HostArray(self.values)


def _effects(values):
    where = _placement[-1]
    if "GPU:" in where and int(where.rsplit(":", 1)[1]) in _cfg.get("wrong_results", []):
        return fakearray.perturb(values)
    return values


def constant(values, dtype=None):
    return EagerTensor(values)


def matmul(a, b):
    return EagerTensor(_effects(fakearray.matmul(a.values, b.values)))


def _conv2d(x, filters, strides=None, padding="VALID"):
    out = fakearray.conv_nchw(fakearray.nhwc_to_nchw(x.values), fakearray.hwio_to_oihw(filters.values))
    return EagerTensor(_effects(fakearray.nchw_to_nhwc(out)))


nn = types.SimpleNamespace(conv2d=_conv2d)
