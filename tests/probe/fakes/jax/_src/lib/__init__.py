"""Stand-in for jax._src.lib: cuda_versions is present when a CUDA plugin is."""

import types

import fakearray

_cuda = fakearray.config("jax").get("cuda", "12.3")
if _cuda:
    _major, _minor = (int(part) for part in _cuda.split("."))
    cuda_versions = types.SimpleNamespace(cuda_runtime_get_version=lambda: _major * 1000 + _minor * 10,
                                          cudnn_get_version=lambda: 90100)
else:
    cuda_versions = None
