"""Functions compiled at run time from source written for one kio class: the encoders of
:mod:`odradek.protocol.encoder`, the request walks of :mod:`odradek.protocol.framing` and the
response builders of :mod:`odradek.protocol.messages`. Each does for every request what a
generic loop over the class's fields would, without the loop, the way ``dataclasses``
compiles ``__init__``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FunctionSource:
    """The body of one function being written, and the names it uses. A subclass that holds
    lines back (a run of fixed-size values written as one) writes them out in :meth:`flush`,
    which comes before every line and at the end."""

    def __init__(self, name: str, parameters: str, names: dict[str, Any] | None = None) -> None:
        self.function_name = name
        self.signature = f"def {name}({parameters}):"
        self.lines: list[str] = []
        self.names: dict[str, Any] = dict(names or {})

    def name(self, prefix: str, value: Any) -> str:
        """A name, unique in this function, by which its source refers to ``value``."""
        name = f"_{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def line(self, text: str, indent: int = 1) -> None:
        self.flush()
        self.lines.append("    " * indent + text)

    def flush(self) -> None:
        """Writes out the lines held back; nothing here."""

    def compile(self, filename: str) -> Callable[..., Any]:
        """The function, its source kept as its ``source`` attribute; ``filename`` names it
        in tracebacks and profiles."""
        self.flush()
        text = "\n".join([self.signature, *(self.lines or ["    pass"])]) + "\n"
        namespace = dict(self.names)
        exec(compile(text, filename, "exec"), namespace)
        function = namespace[self.function_name]
        function.source = text
        return function
