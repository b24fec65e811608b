from replication_harness import broker_config, clock, replica_manager  # noqa: F401  (fixtures)
