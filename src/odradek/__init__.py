"""odradek: a Kafka-compatible distributed commit log."""
