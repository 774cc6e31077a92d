"""--nodes with JAX: this process joins the others through jax.distributed (the coordinator at the first node's
address), then a psum across every process's devices (jax.pmap over the global devices: NCCL on GPUs, gloo on CPUs)
whose sum is checked, then timed."""

import time

from .collective import MULTI_GPU_CHECK_ELEMENTS, check_rank_sum, enter_phase


def jax_rank(out, addresses):
    import jax

    rank, world = out["rank"], out["world_size"]
    _gloo_between_cpus(jax)
    out["method"] = "jax.distributed psum"
    enter_phase(out, "rendezvous")
    started = time.time()
    arguments = {"coordinator_address": "%s:%d" % (out["address"], out["port"]), "num_processes": world,
                 "process_id": rank}
    try:
        jax.distributed.initialize(initialization_timeout=max(1, int(out["timeout"])), **arguments)
    except TypeError:  # a JAX without initialization_timeout
        jax.distributed.initialize(**arguments)
    out["rendezvous_seconds"] = round(time.time() - started, 3)
    try:
        import jax.numpy as jnp

        local = jax.local_devices()
        gpu = any(str(getattr(device, "platform", "")).lower() in ("gpu", "cuda") for device in local)
        out["backend"] = "nccl" if gpu else "gloo"
        enter_phase(out, "all_reduce")
        allreduce = jax.pmap(lambda values: jax.lax.psum(values, "nodes"), axis_name="nodes")
        # One row per local device; the first device of each process gives rank + 1, its others 0: the sum is
        # world (world + 1) / 2 whatever the number of GPUs per node.
        rows = [[float(rank + 1) if index == 0 else 0.0] * MULTI_GPU_CHECK_ELEMENTS for index in range(len(local))]
        sums = jax.device_get(allreduce(jnp.asarray(rows, dtype=jnp.float32))).tolist()
        for values in sums:
            check_rank_sum(out, values)
            if not out["correct"]:
                break
        values = allreduce(jnp.zeros((len(local), out["bytes"] // 4), dtype=jnp.float32))  # compiled, warmed up
        values.block_until_ready()
        started = time.perf_counter()
        for _ in range(out["iterations"]):
            values = allreduce(values)  # zeros: the sums stay zero however long the chain
        values.block_until_ready()
        out["seconds_per_op"] = (time.perf_counter() - started) / out["iterations"]
        out["ok"] = bool(out["correct"])
    finally:
        try:
            jax.distributed.shutdown()
        except Exception:
            pass


def _gloo_between_cpus(jax):
    """Collectives between CPU processes need an implementation (gloo): JAX's default from 0.5 on, 'none' before."""
    try:
        if getattr(jax.config, "jax_cpu_collectives_implementation", "gloo") in (None, "none"):
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except Exception:
        pass
