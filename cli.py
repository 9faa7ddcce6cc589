"""pstranspile: split a Paddle training program for a parameter-server cluster.

The command line is transpile/commands/ (the root group in root.py, a module per command); this
module is its entry point (`pstranspile = "cli:run"`) and keeps `main`, the root click group.

Exit codes: 0 success, 1 differences or findings (diff/check), 2 bad input or a refused split,
3 internal error.
"""
from transpile.commands.root import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":  # pragma: no cover
    run()
