"""How an environment's prefix gets made: one module per backend behind one small interface (base.Backend)."""
