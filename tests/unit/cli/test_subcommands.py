"""The ``odradek`` command loads a subcommand's module only when that subcommand runs, and
still lists every one in its help."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from odradek.cli.main import SUBCOMMANDS, app


def test_help_lists_every_subcommand_in_order_with_its_summary():
    result = CliRunner().invoke(app, ["--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    listed = [line.split()[1] for line in result.output.splitlines()
              if line.startswith("│ ") and len(line.split()) > 2
              and line.split()[1] in SUBCOMMANDS]
    assert listed == list(SUBCOMMANDS)
    assert "Create, list, describe, alter, delete and reassign topics." in result.output


def test_a_command_and_a_group_run_from_their_modules():
    runner = CliRunner()
    produce = runner.invoke(app, ["produce", "--help"], terminal_width=200)
    assert produce.exit_code == 0 and "Write each line of stdin" in produce.output
    topics = runner.invoke(app, ["topics", "create", "--help"], terminal_width=200)
    assert topics.exit_code == 0 and "--partitions" in topics.output
    unknown = runner.invoke(app, ["no-such-command"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def test_a_client_command_does_not_load_the_broker():
    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys\n"
         "from odradek.cli.main import app\n"
         "try:\n"
         "    app(['produce', '--help'])\n"
         "except SystemExit:\n"
         "    pass\n"
         "print(*sorted(m for m in sys.modules if m.startswith('odradek.')), file=sys.stderr)"],
        capture_output=True, text=True, check=True).stderr.split()
    assert "odradek.cli.produce" in loaded
    assert not [m for m in loaded if m.startswith(("odradek.server.broker", "odradek.cli.acls",
                                                   "odradek.coordinator"))], loaded
