"""The ``odradek`` command."""

from __future__ import annotations

import typer

from odradek.cli import (
    acls,
    broker,
    certs,
    cluster,
    configs,
    consume,
    demo,
    groups,
    perf,
    pipeline,
    produce,
    quotas,
    share_groups,
    topics,
    transactions,
    users,
)

app = typer.Typer(
    name="odradek",
    help="odradek: a Kafka-compatible distributed commit log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("broker")(broker.broker)
app.add_typer(topics.app, name="topics")
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.add_typer(configs.app, name="configs")
app.add_typer(groups.app, name="groups")
app.add_typer(share_groups.app, name="share-groups")
app.add_typer(transactions.app, name="transactions")
app.add_typer(demo.app, name="demo")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(cluster.app, name="cluster")
app.add_typer(certs.app, name="certs")
app.add_typer(users.app, name="users")
app.add_typer(acls.app, name="acls")
app.add_typer(quotas.app, name="quotas")
app.add_typer(perf.app, name="perf")


if __name__ == "__main__":
    app()
