"""Installing toolkits: the store, safe extraction, channel layouts, and the installer."""
