from group_harness import groups  # noqa: F401  (the fixture)
