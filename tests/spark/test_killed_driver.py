"""A streaming query whose driver is killed (SIGKILL, JVM included) and restarted from its
checkpoint loses nothing, and writes again at most the micro-batch that was in flight."""

from __future__ import annotations

import time

from drivers import TIMEOUT_SECONDS, CopyQuery, kill, topic_values

RECORDS = 3000
PER_BATCH = 200  # maxOffsetsPerTrigger: the most a restart may write twice


def test_a_killed_driver_restarts_from_its_checkpoint_losing_nothing(
        bootstrap, topic, produce, tmp_path):
    source, sink = topic(partitions=2), topic(partitions=2)
    values = [b"%06d" % i for i in range(RECORDS)]
    produce(source, values)
    query = CopyQuery(bootstrap, source, sink, tmp_path / "checkpoint", PER_BATCH)

    running = query.start()
    try:  # kill it mid-stream: some batches written, not all
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while sum(topic_values(bootstrap, sink, 2).values()) < RECORDS // 3:
            assert running.poll() is None, "the driver exited on its own"
            assert time.monotonic() < deadline, "the query wrote too little in time"
            time.sleep(0.5)
    finally:
        kill(running)
    written_before_restart = sum(topic_values(bootstrap, sink, 2).values())
    assert written_before_restart < RECORDS, "killed too late to test anything"

    query.run_to_end()

    got = topic_values(bootstrap, sink, 2)
    assert set(got) == set(values)  # nothing lost
    written_twice = sum(count - 1 for count in got.values())
    assert written_twice <= PER_BATCH  # at most the micro-batch in flight at the kill
