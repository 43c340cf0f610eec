"""RTL code and functional coverage: merge the simulator runs' data, waive, report.

`make coverage` runs ``python -m tools.coverage`` (``__main__``); docs/verification.md
explains the figures.
"""
