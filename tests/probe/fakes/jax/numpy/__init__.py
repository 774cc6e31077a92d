"""Stand-in for jax.numpy: asarray and dot."""

import jax
import fakearray

float32 = "float32"


def asarray(values, dtype=None):
    return jax.Array(values, jax.devices()[0])


def dot(a, b):
    return jax.Array(jax._effects(a, fakearray.matmul(a.values, b.values)), a.device)
