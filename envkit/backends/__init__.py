"""How an environment's prefix gets made: one module per backend behind one small interface (base.Backend), chosen
in ``choose.py``; what a backend is asked to build (``plan.py``, pure), the pip steps every backend runs
(``installers.py``), and the embedded conda engine of the ``rattler`` backend (``conda_engine.py``)."""
