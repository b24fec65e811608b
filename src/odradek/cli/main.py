"""The ``odradek`` command.

A subcommand's module is imported when that subcommand runs, or when help lists them all:
``odradek produce`` does not load the broker, nor does ``odradek broker`` load the admin
commands and the TLS toolkit. Most of a short command's time would otherwise go to imports.
"""

from __future__ import annotations

import importlib

import typer
from typer.core import TyperCommand, TyperGroup

# Each subcommand as help lists it: its module in odradek.cli, and the name there of either
# its function (a command) or its Typer app (a group of commands).
SUBCOMMANDS = {
    "broker": ("broker", "broker"),
    "produce": ("produce", "produce"),
    "consume": ("consume", "consume"),
    "topics": ("topics", "app"),
    "configs": ("configs", "app"),
    "groups": ("groups", "app"),
    "share-groups": ("share_groups", "app"),
    "transactions": ("transactions", "app"),
    "demo": ("demo", "app"),
    "pipeline": ("pipeline", "app"),
    "cluster": ("cluster", "app"),
    "certs": ("certs", "app"),
    "users": ("users", "app"),
    "acls": ("acls", "app"),
    "quotas": ("quotas", "app"),
    "perf": ("perf", "app"),
}


class Subcommands(TyperGroup):
    """The subcommands of ``SUBCOMMANDS``, each built from its module on first use."""

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | TyperGroup | None:
        if cmd_name not in self.commands and cmd_name in SUBCOMMANDS:
            module_name, attribute = SUBCOMMANDS[cmd_name]
            target = getattr(importlib.import_module(f"odradek.cli.{module_name}"), attribute)
            if isinstance(target, typer.Typer):
                command = typer.main.get_group(target)
            else:  # a function: a single command
                single = typer.Typer(add_completion=False)
                single.command(cmd_name)(target)
                command = typer.main.get_command(single)
            command.name = cmd_name
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    name="odradek",
    cls=Subcommands,
    help="odradek: a Kafka-compatible distributed commit log.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main() -> None:
    pass  # a callback makes ``app`` the group of SUBCOMMANDS; it has no options of its own


if __name__ == "__main__":
    app()
