"""Stand-in for jax.numpy: asarray, full and dot (TF32 at default precision on GPUs with the "tf32" switch)."""

import jax
import fakearray

float32 = "float32"
float16 = "float16"


def asarray(values, dtype=None):
    return jax.Array(values, jax.devices()[0], dtype=dtype or float32)


def full(shape, fill_value, dtype=None):
    value = fill_value.fill if isinstance(fill_value, jax.Array) else fill_value
    return jax.Array(shape=shape, fill=float(value), dtype=dtype or float32)


def dot(a, b, precision=None):
    if a.values is None or b.values is None:  # big: the shape and what every element would be
        if a.device is not b.device:
            raise ValueError("Received incompatible devices for jitted computation")
        fakearray.take_time(jax._cfg, "matmul", 2.0 * a.shape[0] * a.shape[1] * b.shape[1])
        return jax.Array(shape=(a.shape[0], b.shape[1]), fill=jax._effects(a, a.fill * b.fill * a.shape[1]),
                         device=a.device, dtype=a.dtype)
    if a.device.platform == "gpu" and jax._cfg.get("tf32") and precision != jax.lax.Precision.HIGHEST:
        # XLA's default precision on Ampere and newer GPUs: the inputs rounded to TF32 (10 bits of mantissa).
        a, b = jax.Array(fakearray.tf32(a.values), a.device), jax.Array(fakearray.tf32(b.values), b.device)
    return jax.Array(jax._effects(a, fakearray.matmul(a.values, b.values)), a.device)
