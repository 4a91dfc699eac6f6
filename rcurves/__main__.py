"""``python -m rcurves ...`` is the ``rcurves`` command."""
from rcurves.cli import main

raise SystemExit(main())
