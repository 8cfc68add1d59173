"""The backends bundled with hetero.

Each subpackage is a plugin found through the ``hetero.backends`` entry-point group,
exactly as a third-party plugin would be; the core never imports from here.
"""
