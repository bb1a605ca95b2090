"""Fleets: the ``cuda.lock.toml`` document, building and checking locks, static
mirrors, and installing exactly what a lock names."""
