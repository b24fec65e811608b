"""Side-by-side benchmark of odradek against Tansu (``make bench`` / ``python -m bench``).

Modules:
    brokers   -- locate, start, wait for and stop the broker processes (and py-spy)
    workloads -- the produce / consume / end-to-end latency workloads (confluent-kafka)
    report    -- the results table, the targets and the JSON file in bench/results/
"""
