"""Where packages are cached and what environments cost on disk: the cache's place (``cache.py``), whether hard links
work between two directories, found by making one (``links.py``), disk usage counted as ``du`` counts it
(``usage.py``) and the room a new environment needs against what its filesystems have (``room.py``).

A foundation floor: the standard library, envkit.errors, envkit.state.files and envkit.state.ownership (whether a
directory is an environment's) only; envkit.create.storage brings the config in.
"""
