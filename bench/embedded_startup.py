"""How long the `odradek_broker` test fixture takes to be ready: start, first answer, stop.

    .venv/bin/python -m bench.embedded_startup [--runs N]

Each run starts an EmbeddedBroker on a fresh temporary directory, waits for a Metadata
answer from a real client (confluent-kafka), and stops it; the import of odradek is
measured once, separately, since a test session pays it once.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    started = time.perf_counter()
    from confluent_kafka.admin import AdminClient

    from odradek.testing import EmbeddedBroker
    import_seconds = time.perf_counter() - started

    ready, stop = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as data_dir:
            started = time.perf_counter()
            broker = EmbeddedBroker(data_dir).start()
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.list_topics(timeout=10)
            ready.append(time.perf_counter() - started)
            started = time.perf_counter()
            broker.stop()
            stop.append(time.perf_counter() - started)

    print(f"import odradek.testing: {import_seconds * 1000:.0f} ms (once per session)")
    print(f"start + first Metadata answer: median {statistics.median(ready) * 1000:.1f} ms, "
          f"max {max(ready) * 1000:.1f} ms over {args.runs} runs")
    print(f"stop: median {statistics.median(stop) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
