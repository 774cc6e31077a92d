"""`envkit create`: from the selected build to a working, verified, recorded environment (with its Jupyter kernel,
``jupyter.py``), or to nothing; `envkit remove`; and `envkit envs`' table of what was made and of the runs going on
or cut short (``records_render.py``)."""
