"""One module per CLI command; each defines ``register(app)`` and stays a thin wrapper over the library."""
