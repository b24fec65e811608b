"""pytest plugin: the embedded odradek broker fixture (filled in with the server)."""
