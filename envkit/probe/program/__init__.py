"""envkit's post-install probe: a program run by an environment's own Python that prints ONE JSON document.

    python -I probe.pyz FRAMEWORK [--multi-gpu] [--bench] [--multi-gpu-timeout=SECONDS] [--companions=NAME,...]

FRAMEWORK is torch, tensorflow, jax, mxnet, or auto (the first of those that is installed). The probe imports the
framework, lists its GPUs, runs a matrix product (and a convolution) on the CPU and on EVERY GPU, compares each GPU
result with the CPU one, and records every warning, error message and traceback it meets. It never crashes without
printing its JSON: everything it does is guarded. The companions the build installs (--companions, and those it
knows that are installed: torchvision, torchaudio) are imported, and one small operation of each runs on the CPU and
on every GPU (companions).

--cross-node-worker FRAMEWORK RANK WORLD ADDRESSES PORT TIMEOUT BYTES ITERATIONS (envkit verify --nodes, on each
node): this node's rank of an all-reduce across nodes with the environment's own framework (cross_node and its
cross_node_jax, cross_node_tensorflow: torch.distributed, jax.distributed's psum, TensorFlow's
MultiWorkerMirroredStrategy; NCCL on GPUs), its sum checked and timed. ADDRESSES: every node's, comma-separated.

--multi-gpu: with two GPUs or more, a real all-reduce across all of them whose sum is checked, then timed (bus
bandwidth): torch: NCCL, one process per GPU (this program in --nccl-worker mode); tensorflow: a MirroredStrategy's
ReplicaContext.all_reduce; jax: a psum under jax.pmap. --bench: matrix products on each GPU, TFLOP/s in float32 and
float16 (torch, tensorflow, jax). Neither is built for mxnet (retired).

The modules: main (arguments, the report, the JSON on stdout), record (errors, warnings and stderr kept), checks
(the computations and their comparison with a pure-Python reference), collective and bench (--multi-gpu and --bench,
shared by the frameworks), frameworks (which are installed), companions, and one module per framework: torch_probe,
tensorflow_probe, jax_probe, mxnet_probe. envkit.probe.program_zip assembles them into one zipapp (a package
``envkit_probe`` and a ``__main__.py``), which is what the runner starts.

Rules for every module here: standard library only, relative imports between them, never import envkit (they run
inside another environment, as the package ``envkit_probe``), and stay valid on Python 3.6 (no walrus, no
``f"{x=}"``, no ``from __future__ import annotations``, no dataclasses). tests/probe/test_probe_program.py checks it.
"""
