"""The machines an environment is for: the machine profile (``profile.py``: what a machine's driver and GPUs
can run, read from a file or overridden), fleets of profiles (``fleet.py``: several files, a directory, a partition),
what an environment was made for as its record keeps it (``target.py``), and the lookups in the CUDA and GPU-name
tables (``cuda.py``, ``gpu_names.py``; the tables themselves are data in envs/). Detection (envkit.detect) and the
site file (envkit.site) make profiles; nothing here imports them."""
