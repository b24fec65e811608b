"""What TLS and SASL cost: produce and consume throughput and end-to-end latency through a
PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512) listener of one fresh odradek broker, in
one run.

    .venv/bin/python -m bench.security [--records 2000000] [--runs 3] [--quick]
                                       [--wait-idle S] [--output FILE]

The workloads are ``bench.workloads``' (100-byte records, 6 partitions, one confluent-kafka
producer with 1 MB batches, one consumer, latency at 2,000 records/s), each row the median
of ``--runs`` runs, with the broker's own CPU-seconds per million records from /proc. The
certificates are made for the run (``odradek.security.certificates``, EC P-256 keys, TLS 1.3).
Target (issue #12): TLS costs at most 30% of plaintext throughput for 100-byte records in
1 MB batches.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import brokers, workloads
from bench.brokers import HOST, RESULTS_DIR
from odradek.security.certificates import CertificateAuthority, CertificateFiles, write_file
from odradek.security.scram import ScramMechanism

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"
TARGET_COST = 0.30  # of plaintext throughput, for TLS


def broker_sets(pki: Path, ports: dict[str, int]) -> list[str]:
    """``--set`` items for listeners of every kind, with SCRAM on SASL_SSL."""
    return [
        "listeners=" + ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items()),
        "ssl.keystore.type=PEM", f"ssl.keystore.location={pki / 'broker.pem'}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={pki / 'ca.pem'}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
    ]


def client_settings(listener: str, port: int, pki: Path) -> dict[str, str]:
    settings = {"bootstrap.servers": f"{HOST}:{port}", "security.protocol": listener.lower()}
    if listener != "PLAINTEXT":
        settings["ssl.ca.location"] = str(pki / "ca.pem")
    if listener.startswith("SASL"):
        settings |= {"sasl.mechanism": ScramMechanism.SCRAM_SHA_512.mechanism_name,
                     "sasl.username": USER, "sasl.password": PASSWORD}
    return settings


def add_scram_user(plaintext: dict[str, str]) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        UserScramCredentialUpsertion,
    )
    from confluent_kafka.admin import ScramMechanism as Mechanism

    admin = AdminClient(plaintext)
    upsertion = UserScramCredentialUpsertion(USER, ScramCredentialInfo(
        Mechanism.SCRAM_SHA_512, 4096), PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.security", description=__doc__)
    parser.add_argument("--records", type=int)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="300,000 records, one run")
    parser.add_argument("--wait-idle", type=float, default=10.0)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    settings = workloads.Settings(records=args.records or (300_000 if args.quick
                                                           else 2_000_000))
    runs = 1 if args.quick else args.runs
    console = Console()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    pki = Path(tempfile.mkdtemp(prefix="odradek-bench-pki-"))
    ca = CertificateAuthority.create()
    write_file(pki / "ca.pem", ca.certificate_pem())
    CertificateFiles.named(pki, "broker").write(ca.issue_server())
    ports = dict(zip(LISTENERS, (brokers.free_port(29292 + i) for i in range(3)), strict=True))
    broker = brokers.odradek_broker(ports["PLAINTEXT"], RESULTS_DIR / f"{stamp}-security.log",
                                    None, broker_sets(pki, ports))
    payloads = workloads.make_payloads(settings.records, settings.record_size)
    rows: dict[str, dict[str, list[dict]]] = {listener: {} for listener in LISTENERS}
    try:
        broker.start()
        clients = {listener: client_settings(listener, port, pki)
                   for listener, port in ports.items()}
        add_scram_user(clients["PLAINTEXT"])
        brokers.wait_until_idle(args.wait_idle)
        for run in range(runs):
            for listener in LISTENERS:
                client = clients[listener]
                label = f"run {run + 1}/{runs}, {listener}"
                cpu = broker.cpu_seconds()
                with console.status(f"{label}: produce"):
                    produced = workloads.produce_throughput(client, settings, payloads)
                produced["broker_cpu_s_per_million"] = (
                    (broker.cpu_seconds() - cpu) * 1e6 / settings.records)
                cpu = broker.cpu_seconds()
                with console.status(f"{label}: consume"):
                    consumed = workloads.consume_throughput(client, settings, produced["topic"],
                                                            settings.records)
                consumed["broker_cpu_s_per_million"] = (
                    (broker.cpu_seconds() - cpu) * 1e6 / settings.records)
                with console.status(f"{label}: latency"):
                    latency = workloads.end_to_end_latency(client, settings)
                for name, result in (("produce", produced), ("consume", consumed),
                                     ("latency", latency)):
                    rows[listener].setdefault(name, []).append(result)
    finally:
        broker.stop()
    summary = {listener: {name: {key: statistics.median(r[key] for r in results)
                                 for key in results[0]
                                 if isinstance(results[0][key], (int, float))}
                          for name, results in by_workload.items()}
               for listener, by_workload in rows.items()}
    table = Table(title=f"TLS and SASL: {settings.records:,} records of "
                        f"{settings.record_size} bytes, {settings.partitions} partitions, "
                        f"median of {runs}")
    for column in ("listener", "produce rec/s", "vs plaintext", "consume rec/s",
                   "vs plaintext", "broker CPU-s/M produced", "broker CPU-s/M consumed",
                   "latency p50 / p99 ms"):
        table.add_column(column, justify="left" if column == "listener" else "right")
    plain = summary["PLAINTEXT"]
    for listener, values in summary.items():
        produce, consume, latency = values["produce"], values["consume"], values["latency"]
        table.add_row(
            listener, f"{produce['records_per_s']:,.0f}",
            f"{produce['records_per_s'] / plain['produce']['records_per_s']:.2f}x",
            f"{consume['records_per_s']:,.0f}",
            f"{consume['records_per_s'] / plain['consume']['records_per_s']:.2f}x",
            f"{produce['broker_cpu_s_per_million']:.2f}",
            f"{consume['broker_cpu_s_per_million']:.2f}",
            f"{latency['p50_ms']:.1f} / {latency['p99_ms']:.1f}")
    console.print(table)
    cost = {workload: 1 - summary["SSL"][workload]["records_per_s"]
            / plain[workload]["records_per_s"] for workload in ("produce", "consume")}
    for workload, value in cost.items():
        verdict = "PASS" if value <= TARGET_COST else "FAIL"
        console.print(f"TLS costs {value:.1%} of plaintext {workload} throughput (target at "
                      f"most {TARGET_COST:.0%}): {verdict}")
    output = args.output or RESULTS_DIR / f"{stamp}-security.json"
    output.write_text(json.dumps({"records": settings.records, "runs": runs,
                                  "summary": summary, "tls_cost": cost}, indent=2,
                                 default=str))
    console.print(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
