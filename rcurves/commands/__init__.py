"""The ``rcurves`` subcommands' logic, one module per command (``rcurves.commands.curves`` for ``rcurves curves``,
...), each with ``run(args) -> int``; :mod:`rcurves.commands.common` holds what several share. Parsing the command
line is :mod:`rcurves.cli`'s, which imports a command's module only when that command runs."""
from attacks._lazy import attach

__getattr__, __dir__ = attach(__name__, {})     # no public names: the modules are reached by their paths

__all__ = []
