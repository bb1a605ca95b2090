"""Which toolkit is active and switching it: selection, environments, shims, pins,
and the system link (``/usr/local/cuda``).

Kept free of imports: every shim imports :mod:`cudaup.switch.shim` through this
package, and a shim must start with the standard library only.
"""
