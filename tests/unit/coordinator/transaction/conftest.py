from transaction_harness import txns  # noqa: F401  (the fixture)
