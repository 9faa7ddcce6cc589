"""pstranspile: split a Paddle training program for a parameter-server cluster.

The command line is transpile/commands/ (the root group in root.py, a module per command; the
installed console script is `pstranspile = "transpile.commands.root:run"`). This file is a
launcher for a checkout, never installed: `python cli.py ...` from the checkout, and `main`,
the root click group, for the tests (pytest puts the checkout on sys.path).

Exit codes: 0 success, 1 differences or findings (diff/check), 2 bad input or a refused split,
3 internal error.
"""
from transpile.commands.root import main, run

__all__ = ["main", "run"]

if __name__ == "__main__":  # pragma: no cover
    run()
