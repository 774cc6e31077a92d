"""--nodes with TensorFlow: MultiWorkerMirroredStrategy over TF_CONFIG (every node a worker at its address, this one
at its rank's index), then its all-reduce (ReplicaContext.all_reduce, SUM: NCCL on GPUs, a gRPC ring on CPUs) whose
sum is checked, then timed. Two workers on one host (a test cluster) need two ports: worker i listens on port + i."""

import json
import os
import time

from .collective import MULTI_GPU_CHECK_ELEMENTS, check_rank_sum, enter_phase


def worker_list(addresses, port):
    """TF_CONFIG's worker list: node i at its address, on port + i."""
    return ["%s:%d" % (address, port + index) for index, address in enumerate(addresses)]


def tensorflow_rank(out, addresses):
    rank, world = out["rank"], out["world_size"]
    if len(addresses) != world:
        raise RuntimeError("TF_CONFIG needs every node's address: got %d for %d nodes" % (len(addresses), world))
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": worker_list(addresses, out["port"])},
                                          "task": {"type": "worker", "index": rank}})
    import tensorflow as tf

    distribute = tf.distribute
    gpu = bool(tf.config.list_physical_devices("GPU"))
    out.update(method="MultiWorkerMirroredStrategy all-reduce", backend="nccl" if gpu else "ring")
    options = distribute.experimental.CommunicationOptions(timeout_seconds=out["timeout"])
    enter_phase(out, "rendezvous")
    started = time.time()
    strategy = distribute.MultiWorkerMirroredStrategy(communication_options=options)
    replicas = int(strategy.num_replicas_in_sync)
    local = max(1, replicas // world)  # replicas of each worker (its GPUs, or its CPU)
    total = distribute.ReduceOp.SUM
    mine = float(rank + 1)

    def contribute():
        context = distribute.get_replica_context()
        # The first replica of each worker gives rank + 1, its others 0: the sum is world (world + 1) / 2.
        first = tf.equal(context.replica_id_in_sync_group % local, 0)
        value = tf.where(first, tf.constant(mine), tf.constant(0.0))
        return context.all_reduce(total, tf.fill([MULTI_GPU_CHECK_ELEMENTS], value))

    elements = out["bytes"] // 4
    iterations = out["iterations"]

    def chain():
        context = distribute.get_replica_context()
        values = tf.zeros([elements], dtype=tf.float32)  # zeros: the sums stay zero however long the chain
        for _ in range(iterations):
            values = context.all_reduce(total, values)
        return values[:1]  # one value to copy back: it depends on every all-reduce of the chain

    def wait(result):
        for value in strategy.experimental_local_results(result):
            value.numpy()

    sums = strategy.experimental_local_results(tf.function(lambda: strategy.run(contribute))())
    out["rendezvous_seconds"] = round(time.time() - started, 3)  # the workers first met in that all-reduce
    enter_phase(out, "all_reduce")
    for values in sums:
        check_rank_sum(out, values.numpy().tolist())
        if not out["correct"]:
            break
    step = tf.function(lambda: strategy.run(chain))
    wait(step())  # traced, and run once
    started = time.perf_counter()
    wait(step())
    out["seconds_per_op"] = (time.perf_counter() - started) / iterations
    out["ok"] = bool(out["correct"])
