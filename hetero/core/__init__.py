"""hetero core: everything that is not a backend. It never imports hetero.plugins."""
