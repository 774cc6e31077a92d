"""Stand-in for TensorFlow 2 in eager mode (see fakearray.py). Switches, under "tensorflow" in fake_config.json:

version, cuda (None: a CPU build), gpus [{name, capability}], arch_list, wrong_results [GPU indices],
import_error ("missing-library"), oom [GPU indices: allocating a big tensor there fails, as on a full GPU],
collective ("wrong": one replica gets a wrong all-reduce sum; "raise": the all-reduce fails with NCCL's error;
"hang": it never returns),
busbw_gbs and tflops (how long all-reduces and big products take: see fakearray.take_time).

Imported, it writes keras.json into $KERAS_HOME, else ~/.keras (/tmp/.keras where the home is not writable), as
TensorFlow's Keras 3 does when it is imported (keras/src/backend/config.py).

tf.distribute.MirroredStrategy runs its replicas in threads, one per GPU, like the real one, and
ReplicaContext.all_reduce really waits for every replica and sums what they gave. tf.function only calls the
function (nothing is traced). Big tensors (the benchmark's matrices, the all-reduce buffer) are a shape and one
value, like the torch stand-in's; only the time of what is done with them matters.
"""

import contextlib
import os
import threading
import time
import types

import fakearray

_cfg = fakearray.config("tensorflow")
if _cfg.get("import_error") == "missing-library":
    raise ImportError("libcudart.so.11.0: cannot open shared object file: No such file or directory")


def _keras_config():
    home = os.path.expanduser("~")
    keras_dir = os.environ.get("KERAS_HOME") or os.path.join(home if os.access(home, os.W_OK) else "/tmp", ".keras")
    try:
        if not os.path.exists(keras_dir):
            os.makedirs(keras_dir)
        path = os.path.join(keras_dir, "keras.json")
        if not os.path.exists(path):
            with open(path, "w") as handle:
                handle.write('{"floatx": "float32", "epsilon": 1e-07, "backend": "tensorflow", '
                             '"image_data_format": "channels_last"}')
    except OSError:
        pass


_keras_config()

__version__ = _cfg.get("version", "2.15.0")
float32 = "float32"
float16 = "float16"
int32 = "int32"
_GPUS = _cfg.get("gpus", [])
_CUDA = _cfg.get("cuda", "12.2")
_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_GPU = "/job:localhost/replica:0/task:0/device:GPU:%d"
_BIG = 2 ** 20  # elements from which a tensor counts as big (a shape and a fill value)
_local = threading.local()  # per thread: the device stack and the replica context


class InternalError(Exception):
    pass


class ResourceExhaustedError(Exception):
    pass


errors = types.SimpleNamespace(InternalError=InternalError, ResourceExhaustedError=ResourceExhaustedError)


def _placement():
    if not hasattr(_local, "placement"):
        _local.placement = [_CPU]
    return _local.placement


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
    experimental=types.SimpleNamespace(set_memory_growth=lambda device, enable: None, get_device_details=_details,
                                       tensor_float_32_execution_enabled=lambda: True),
)


def _gpu_index(name):
    """The GPU a device name such as "/GPU:1" or "/gpu:1" names, if this machine has it; else None."""
    kind, _, number = name.strip("/").partition(":")
    if kind.upper() == "GPU" and number.isdigit() and int(number) < len(_GPUS) and _CUDA:
        return int(number)
    return None


@contextlib.contextmanager
def device(name):
    index = _gpu_index(name)
    # Soft placement: what TF 2 does with a device it does not have.
    _placement().append(_CPU if index is None else _GPU % index)
    try:
        yield
    finally:
        _placement().pop()


class EagerTensor(object):
    """Nested lists (``values``), or for big tensors a ``shape`` and one ``fill`` value; on the current device."""

    def __init__(self, values=None, shape=None, fill=None, dtype=float32):
        self.values, self.fill, self.dtype = values, fill, dtype
        self.shape = tuple(shape) if shape is not None else None
        self.device = _placement()[-1]
        if self.shape is not None and _size(self.shape) >= _BIG and "GPU:" in self.device:
            index = int(self.device.rsplit(":", 1)[1])
            if index in _cfg.get("oom", []):
                raise ResourceExhaustedError(
                    "OOM when allocating tensor with shape[%s] and type %s on %s by allocator GPU_%d_bfc"
                    % (",".join(str(d) for d in self.shape), "float" if dtype == float32 else dtype, self.device,
                       index))

    def numpy(self):
        if self.values is not None:
            return fakearray.HostArray(self.values)

        def build(shape):
            return [build(shape[1:]) for _ in range(shape[0])] if shape else self.fill
        return fakearray.HostArray(build(list(self.shape)))

    def __add__(self, other):
        if self.values is not None:
            raise NotImplementedError("the stand-in adds to scalars and big tensors only")
        other = other.fill if isinstance(other, EagerTensor) else other
        return EagerTensor(shape=self.shape, fill=self.fill + other, dtype=self.dtype)

    __radd__ = __add__

    def __getitem__(self, key):
        """Slices of big tensors and scalars (what the probe takes to wait for a result)."""
        if self.values is not None:
            raise NotImplementedError("the stand-in slices big tensors only")
        keys = key if isinstance(key, tuple) else (key,)
        shape = []
        for position, size in enumerate(self.shape):
            if position >= len(keys):
                shape.append(size)
            elif isinstance(keys[position], slice):
                shape.append(len(range(*keys[position].indices(size))))
            elif not -size <= keys[position] < size:
                raise IndexError("index %d is out of bounds for dimension of size %d" % (keys[position], size))
        return EagerTensor(shape=shape, fill=self.fill, dtype=self.dtype)


def _size(shape):
    total = 1
    for dim in shape:
        total *= dim
    return total


def _effects(values):
    where = _placement()[-1]
    if "GPU:" in where and int(where.rsplit(":", 1)[1]) in _cfg.get("wrong_results", []):
        return fakearray.perturb(values)
    return values


def constant(values, dtype=None):
    return EagerTensor(values)


def zeros(shape, dtype=float32):
    return EagerTensor(shape=shape, fill=0.0, dtype=dtype)


def fill(dims, value):
    value = value.fill if isinstance(value, EagerTensor) else value
    return EagerTensor(shape=dims, fill=value)


def cast(x, dtype):
    if not isinstance(x, EagerTensor):
        x = EagerTensor(shape=(), fill=x)
    if x.values is not None:
        return EagerTensor(x.values, dtype=dtype)
    value = float(x.fill) if dtype in (float32, float16) else int(x.fill)
    return EagerTensor(shape=x.shape, fill=value, dtype=dtype)


def _normal(shape, mean=0.0, stddev=1.0, dtype=float32, seed=None):
    return EagerTensor(shape=shape, fill=0.5, dtype=dtype)  # one value stands for random ones


random = types.SimpleNamespace(normal=_normal)


def matmul(a, b):
    if a.values is None or b.values is None:  # big: the shape and what every element would be
        if a.shape[1] != b.shape[0]:
            raise InternalError("Matrix size-incompatible: In[0]: [%d,%d], In[1]: [%d,%d]" % (a.shape + b.shape))
        fakearray.take_time(_cfg, "matmul", 2.0 * a.shape[0] * a.shape[1] * b.shape[1])
        return EagerTensor(shape=(a.shape[0], b.shape[1]), fill=_effects(a.fill * b.fill * a.shape[1]),
                           dtype=a.dtype)
    return EagerTensor(_effects(fakearray.matmul(a.values, b.values)))


def _conv2d(x, filters, strides=None, padding="VALID"):
    out = fakearray.conv_nchw(fakearray.nhwc_to_nchw(x.values), fakearray.hwio_to_oihw(filters.values))
    return EagerTensor(_effects(fakearray.nchw_to_nhwc(out)))


nn = types.SimpleNamespace(conv2d=_conv2d)


def function(fn=None, **kwargs):
    return fn if fn is not None else (lambda f: f)


# --- tf.distribute -------------------------------------------------------------------------------------------------

ReduceOp = types.SimpleNamespace(SUM="SUM", MEAN="MEAN")


class NcclAllReduce(object):
    pass


class PerReplica(object):
    def __init__(self, values):
        self.values = tuple(values)


class ReplicaContext(object):
    def __init__(self, replica, count, exchange):
        self._replica, self.num_replicas_in_sync, self._exchange = replica, count, exchange

    @property
    def replica_id_in_sync_group(self):
        return EagerTensor(shape=(), fill=self._replica, dtype=int32)  # a scalar int32 tensor, as in TF 2

    def all_reduce(self, reduce_op, value):
        if reduce_op != ReduceOp.SUM:
            raise NotImplementedError("the stand-in sums only")
        if _cfg.get("collective") == "raise":
            raise InternalError("NCCL: unhandled system error (run with NCCL_DEBUG=INFO for details)")
        if _cfg.get("collective") == "hang":
            time.sleep(3600)  # what NCCL does where peer-to-peer transfers are broken
        exchange = self._exchange
        parts = exchange.gather(self._replica, value)
        if value.values is not None or any(p.values is not None or p.shape != value.shape for p in parts):
            raise InternalError("the stand-in all-reduces tensors made by tf.fill or tf.zeros, of one shape")
        fakearray.take_time(_cfg, "all-reduce", _size(value.shape) * 4, len(parts))
        out = EagerTensor(shape=value.shape, fill=sum(p.fill for p in parts), dtype=value.dtype)
        if _cfg.get("collective") == "wrong" and self._replica == self.num_replicas_in_sync - 1:
            out.fill = fakearray.perturb(out.fill)
        return out


def get_replica_context():
    return getattr(_local, "replica_context", None)


class MirroredStrategy(object):
    def __init__(self, devices=None, cross_device_ops=None):
        if devices is None:
            devices = ["/gpu:%d" % i for i in range(len(_GPUS))] if _CUDA and _GPUS else ["/cpu:0"]
        indices = [_gpu_index(name) for name in devices]
        if None in indices or len(set(indices)) != len(indices):
            raise ValueError("the stand-in MirroredStrategy takes distinct GPUs of this machine, not %r" % (devices,))
        self._gpus = indices
        self.num_replicas_in_sync = len(indices)
        self.extended = types.SimpleNamespace(_cross_device_ops=cross_device_ops,
                                              _inferred_cross_device_ops=NcclAllReduce())

    def run(self, fn, args=(), kwargs=None):
        count = len(self._gpus)
        exchange = fakearray.Exchange(count)

        def replica(position):
            _local.replica_context = ReplicaContext(position, count, exchange)
            try:
                with device("/gpu:%d" % self._gpus[position]):
                    return fn(*args, **(kwargs or {}))
            finally:
                _local.replica_context = None

        results = fakearray.run_replicas(count, exchange, replica)
        return PerReplica(results)

    def experimental_local_results(self, value):
        return value.values if isinstance(value, PerReplica) else (value,)


distribute = types.SimpleNamespace(MirroredStrategy=MirroredStrategy, ReduceOp=ReduceOp,
                                   get_replica_context=get_replica_context, NcclAllReduce=NcclAllReduce)
