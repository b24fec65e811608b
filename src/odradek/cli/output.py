"""Where client commands write: results to stdout, summaries to stderr (so pipes get data only).

Values shown here come from brokers and users, so they are never read as rich markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

_stdout = Console(highlight=False, soft_wrap=True)
_stderr = Console(stderr=True, highlight=False, soft_wrap=True)

# A table sent to a pipe or file is not cut to 80 columns: it is read by grep, not a screen.
_PIPED_TABLE_WIDTH = 10_000


def line(text: str) -> None:
    _stdout.print(text, markup=False)


def note(text: str) -> None:
    _stderr.print(text, markup=False)


def table(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    shown = Table(*columns, box=box.SIMPLE_HEAD, show_edge=False)
    for row in rows:
        shown.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    console = _stdout if _stdout.is_terminal else Console(highlight=False,
                                                          width=_PIPED_TABLE_WIDTH)
    console.print(shown)


def records(count: int) -> str:
    return f"{count} record" if count == 1 else f"{count} records"
