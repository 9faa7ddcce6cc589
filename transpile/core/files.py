"""Reading an input file whole, with the one-line errors every input gets."""
from __future__ import annotations


def read_bytes(path: str, error, what: str) -> bytes:
    """The bytes of `path`; a missing, unreadable or directory path raises `error` (a UserError
    class) naming the file; `what` says what it should have been ("config file", ...)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise error("%s: no such file" % path) from None
    except IsADirectoryError:
        raise error("%s: is a directory, not a %s" % (path, what)) from None
    except OSError as e:
        raise error("%s: cannot read (%s)" % (path, e.strerror or e)) from None
