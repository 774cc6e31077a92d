"""Slurm as the engine that reaches a cluster's GPU nodes: envkit never opens its own connections to them.

``sinfo`` (pure parsers of its output) finds the GPU partitions and their node configurations, ``client`` runs
``sinfo``/``srun``/``sbatch``/``scancel`` through envkit.system.process with time limits, ``script`` builds an sbatch
script from its parameters, ``survey`` detects one node per configuration through ``srun``, and ``job_context``
reads what a running job was given (its GPUs) from the environment.
"""
