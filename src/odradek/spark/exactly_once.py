"""The exactly-once sink (``exactlyOnce``): each row of a streaming query's micro-batches is
in the topic once for read_committed readers, across task retries, killed tasks, and a
driver killed at any instant and restarted from its checkpoint. It uses nothing but Kafka's
protocol — transactions (KIP-98) and stable offset fetches (KIP-447) — so it works with any
Kafka-compatible broker that has transactions.

What Spark guarantees, and the sink builds on: a micro-batch that did not finish (the
checkpoint's offset log has it, its commit log does not) runs again after a restart with
the same batch id and the same offsets, and a deterministic plan cuts it into the same
tasks, so a task's partition id stands for the same rows each time. Spark gives the batch
id to the batch's jobs as the local property ``streaming.sql.batchId`` and the query's id,
kept in the checkpoint and so the same across restarts, as ``sql.streaming.queryId``; the
jobs of ``foreachBatch`` get both too.

A task with partition id ``p`` of micro-batch ``b``, for the sink named ``s`` (``sinkId``):

1. A producer with ``transactional.id = f"{s}-{p}"`` calls ``init_transactions()``. That
   fences every earlier producer of the id — an attempt of the task still running, a
   speculative copy, the task of a killed driver — and the transaction coordinator aborts
   the transaction such a producer left open, or finishes one being committed, before it
   answers.
2. The task looks up what the id committed last: the **marker**, the committed offset of the
   consumer group named ``f"{s}-{p}"`` on partition 0 of the target topic, whose offset is a
   batch id and whose metadata is the query id. It is read by a read_committed consumer,
   whose OffsetFetch asks for stable offsets, so an offset commit still being completed is
   waited out (UNSTABLE_OFFSET_COMMIT is retried).
3. If the marker is this query's and its batch is ``b`` or later, the rows are in the topic
   already and the task writes nothing. Otherwise it begins a transaction, produces its rows,
   adds the marker (offset ``b``, metadata the query id) to the same transaction with
   ``send_offsets_to_transaction``, and commits: the rows and the marker become visible
   together or not at all. Any error aborts the transaction; a task that dies leaves it open
   for the next ``init_transactions`` of its id to abort, or for the broker once
   ``transaction.timeout.ms`` has passed.

So:

- The driver dies after the tasks of ``b`` committed but before Spark's commit log has
  ``b``: the restart runs ``b`` again, and every task finds its marker at ``b`` and writes
  nothing.
- The driver, or a task, dies mid-transaction: the restarted (or retried) task of the same
  partition id aborts the open transaction in step 1, finds a marker before ``b``, and writes
  ``b``.
- A task that committed but failed before Spark heard of it is retried: the retry finds the
  marker and writes nothing.
- Two attempts of a task at once: the later ``init_transactions`` fences the earlier, whose
  commit then fails; one transaction of the id commits, never two.

Readers: read_uncommitted readers also see the rows of aborted attempts; read_committed
readers see each row once, when its task commits, and nothing of a partition beyond a
transaction still open (the last stable offset), so the open transaction of a killed task
holds a partition back until it is aborted.

Limits:

- The plan must be deterministic: task ``p`` of a replayed batch must get the same rows (in
  any order). The odradek source, Spark's rate source, stateless transformations and
  stateful ones (the checkpoint fixes their shuffle partitions) are; ``rand()``,
  nondeterministic UDFs, or a change to the query or to ``minPartitions`` between a kill and
  the restart are not.
- ``kafka.transaction.timeout.ms`` (librdkafka's default 60 s, at most the broker's
  ``transaction.max.timeout.ms``) must be longer than a task takes to write its rows, or the
  broker aborts the transaction and the task fails and is retried. It is also how long a
  transaction left open by a task that died blocks read_committed readers when its id is not
  used again soon: when the query is not restarted, or restarts cut into fewer tasks.
  Transactional ids of partition ids that no longer occur (the number of tasks went down)
  hold only finished transactions; the broker forgets them after
  ``transactional.id.expiration.ms``, and their groups' markers after
  ``offsets.retention.minutes``.
- Markers are offsets of groups without members, which the broker deletes
  ``offsets.retention.minutes`` (7 days in Kafka) after their last commit: a query stopped
  that long with its last micro-batch committed by the tasks but not by Spark writes that
  micro-batch again when it restarts.
- ``sinkId`` names the transactional ids and the marker groups (``f"{sinkId}-{p}"``, listed
  by ``odradek groups list``): it must stay the same across restarts of a query and be used by
  one running sink only. A marker of another query (a new checkpoint with an old ``sinkId``)
  says nothing about this one's batches, which are written.
- One exactly-once write per ``sinkId`` and micro-batch: a second one in the same
  ``foreachBatch`` call would find the first one's markers and write nothing.
- Batch writes (``df.write``) with ``exactlyOnce`` are exactly-once inside ``foreachBatch``,
  where the micro-batch id is set (the update-mode pipelines write so); outside a streaming
  query there is no micro-batch to name, and the write fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import confluent_kafka

from odradek.spark.options import OptionError, SinkOptions

# The local properties Spark sets on a micro-batch's jobs (MicroBatchExecution.BATCH_ID_KEY,
# StreamExecution.QUERY_ID_KEY).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
# Where the marker is committed: any existing partition would do, and every topic has 0.
MARKER_PARTITION = 0
# Each transactional call waits for the coordinator, not for the task's rows: a stuck
# coordinator fails the task (which Spark retries) rather than hanging it.
TRANSACTION_CALL_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class MicroBatchTask:
    """The task this write runs in: which micro-batch of which query, and which partition."""

    query_id: str
    batch_id: int
    partition: int

    @classmethod
    def current(cls) -> MicroBatchTask:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
        if batch_id is None:
            raise OptionError("'exactlyOnce' writes the micro-batches of a streaming query "
                              "(writeStream, or a write inside foreachBatch), and this write "
                              "is not part of one")
        return cls(context.getLocalProperty(QUERY_ID_PROPERTY) or "", int(batch_id),
                   context.partitionId())

    def is_covered_by(self, marker: confluent_kafka.TopicPartition) -> bool:
        """Whether ``marker`` (the group's committed offset) says an earlier attempt of this
        task, or of a later micro-batch of this query, committed."""
        return (marker.offset >= 0 and marker.metadata == self.query_id
                and marker.offset >= self.batch_id)


@contextmanager
def transaction(options: SinkOptions) -> Iterator[confluent_kafka.Producer | None]:
    """This task's producer, inside a transaction that commits with the task's marker when
    the block ends and aborts if it raises; or None, when an earlier attempt committed the
    task's rows and the task must write nothing."""
    task = MicroBatchTask.current()
    name = f"{options.sink_id}-{task.partition}"
    producer = confluent_kafka.Producer({"linger.ms": 5, **options.client_config,
                                         "transactional.id": name})
    producer.init_transactions(TRANSACTION_CALL_TIMEOUT_SECONDS)
    markers = confluent_kafka.Consumer({**options.client_config, "group.id": name,
                                        "isolation.level": "read_committed",
                                        "enable.auto.commit": False})
    try:
        [last] = markers.committed(
            [confluent_kafka.TopicPartition(options.topic, MARKER_PARTITION)],
            TRANSACTION_CALL_TIMEOUT_SECONDS)
        if last.error is not None:
            raise confluent_kafka.KafkaException(last.error)
        if task.is_covered_by(last):
            yield None
            return
        producer.begin_transaction()
        try:
            yield producer
            marker = confluent_kafka.TopicPartition(options.topic, MARKER_PARTITION,
                                                    task.batch_id, metadata=task.query_id)
            producer.send_offsets_to_transaction([marker], markers.consumer_group_metadata(),
                                                 TRANSACTION_CALL_TIMEOUT_SECONDS)
            producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_SECONDS)
        except BaseException:
            _abort(producer)
            raise
    finally:
        markers.close()


def _abort(producer: confluent_kafka.Producer) -> None:
    try:
        producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_SECONDS)
    except confluent_kafka.KafkaException:
        # Fenced, or the coordinator is out of reach: the next init_transactions of the id
        # aborts the transaction, or the broker does after transaction.timeout.ms.
        pass
