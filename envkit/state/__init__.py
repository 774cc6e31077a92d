"""What envkit keeps on disk, and how it reads and writes it: the user's directories (``userdirs.py``) and config
file (``config.py``), the records of the environments envkit made (``records.py``) and whether a directory still
holds its environment (``ownership.py``), paths read safely and files written atomically (``files.py``), a file
written at a path someone named (``output.py``), results kept until their files change (``filecache.py``), the lock
on a file others write too (``sharedlock.py``), YAML read safely (``yamltext.py``), and the test-only pause and fault
points (``testpause.py``)."""
