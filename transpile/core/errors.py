"""Error types that the CLI turns into exit codes.

UserError and its subclasses are problems with the user's input (exit 2, one line).
Anything else escaping a command is an internal error (exit 3).
"""


class UserError(Exception):
    """Bad input: a file, a field or a value the user can fix. Exit status 2."""

    def __init__(self, message: str, *, op=None):
        super().__init__(message)
        self.message = message
        self.op = op            # the op it is about, when there is one (a pass names it)

    def __str__(self) -> str:
        return self.message


class ProgramFormatError(UserError):
    """A program file that cannot be read as a Paddle ProgramDesc."""


class ConfigError(UserError):
    """A cluster config that is not valid."""


class RefusedError(UserError):
    """An input that Paddle's transpiler refuses too (geo mode without sparse params, ...)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived while a folder was being written (core/signals.py): raised
    like Ctrl-C's KeyboardInterrupt, so that the same clean-up runs; the CLI then exits
    128 + the signal's number, as a process the signal killed would."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
