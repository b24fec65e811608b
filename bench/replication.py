"""odradek's replicated rows of the suite: the produce workload on one broker and on three
with replication factor 3, acks=1 and acks=all (``bench.cluster``'s throughput rows, each on
a ``LocalCluster`` of its own), with the brokers' CPU per million records."""

from __future__ import annotations

from bench import cluster, workloads
from bench.rows import Row, failed_run


def replicated_rows(settings: workloads.Settings, runs: int) -> list[Row]:
    settings = workloads.Settings(records=settings.records, partitions=cluster.PARTITIONS)
    payloads = workloads.make_payloads(settings.records, settings.record_size)
    rows = []
    for spec in cluster.THROUGHPUT_ROWS:
        row = Row("replication", spec.name, "odradek", "records/s")
        rows.append(row)
        result: dict = {}
        try:
            with cluster.running_cluster(result, spec.brokers, spec.configs,
                                         cluster.DEFAULT_SESSION_TIMEOUT_MS) as running:
                for _ in range(runs):
                    run = cluster.throughput_run(running, settings, payloads, spec)
                    row.runs.append({
                        "value": run["records_per_s"], "mb_per_s": run["mb_per_s"],
                        "broker_cpu_s_per_m": run["broker_cpu_s_per_million"],
                        "replicated_after_flush_s": run["replicated_after_flush_s"]})
        except Exception as exc:  # noqa: BLE001 - a cluster that fails is a failed row
            row.runs.append(failed_run(exc))
    return rows
