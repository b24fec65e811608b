"""One-line errors and a non-zero exit: what the CLI does instead of a traceback."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

# soft_wrap: one line even when it is longer than the terminal is wide.
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 1) -> NoReturn:
    _stderr.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)
