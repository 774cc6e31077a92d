"""Environments that travel (docs/travel.md): one SquashFS image of an environment, with what it fits recorded
inside it and beside it (``image.py``), made with mksquashfs (``pack.py``), run without unpacking through squashfuse
in user space (``mount.py``), or inside Apptainer (``apptainer.py``); and offline bundles of every file a lock
installs (``bundle.py``)."""
