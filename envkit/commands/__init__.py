"""The command groups of the envkit command line, one module each.

Every module here defines ``register(app)``, which adds its commands to the typer app; ``envkit.cli`` lists the
modules. A command parses its options, calls the library, renders the result and exits with the right code; it
holds no logic of its own. The library never imports this package.

Imports inside commands stay lazy (in the function bodies): ``envkit list`` is what people run most, and its
start-up is measured by bench/list_startup.py.
"""
