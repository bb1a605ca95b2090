"""Small shared mechanisms: atomic writes, cancellable concurrency, and the cache
directory (the one owner of every path under it)."""
