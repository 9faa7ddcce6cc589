"""Load and save programs by file extension: .pb / .pdmodel (ProgramDesc bytes) or .json."""
from __future__ import annotations

import os

from . import protoread, protowrite
from ..core.errors import ProgramFormatError
from ..core.files import read_bytes
from ..core.gcpause import paused_gc
from ..ir.program import Program
from .opsource import InputFile

BINARY_EXTS = (".pb", ".pdmodel")
TEXT_EXTS = (".json",)


def program_format(path: str) -> str:
    """'pb' or 'json' from the file name; ProgramFormatError for anything else."""
    low = path.lower()
    if low.endswith(BINARY_EXTS):
        return "pb"
    if low.endswith(TEXT_EXTS):
        return "json"
    raise ProgramFormatError("%s: unknown program format (use .pb, .pdmodel or .json)" % path)


def from_bytes(data: bytes, read_only: bool = False) -> Program:
    """A program from its ProgramDesc bytes (`read_only`: protoread.decode's)."""
    with paused_gc():
        return protoread.decode(data, read_only)


def to_bytes(program: Program) -> bytes:
    with paused_gc():
        return protowrite.encode(program)


def to_chunks(program: Program):
    """The ProgramDesc bytes as byte strings to write one after the other (never joined:
    see protowrite.encode_chunks)."""
    with paused_gc():
        yield from protowrite.encode_chunks(program)


def read_file_bytes(path: str) -> bytes:
    return read_bytes(path, ProgramFormatError, "program file")


def load(path: str, read_only: bool = False, in_file: bool = False,
         validate: bool = True) -> Program:
    """Read a program file; errors name the file. `read_only`: a binary program only looked
    at, kept small (protoread.decode's; a JSON one keeps no bytes anyway). `in_file`: a
    binary program keeps where its ops' bytes are in the file, not the bytes
    (opsource.InputFile: most of a program as Paddle saves it is call stacks), so the file
    must not be written over while the program is in use (split's inputs: it checks; check's
    large programs, only read: see large_file). `validate`: the structure checks
    (ir/validate.py validate_structure), which check's reading of a split leaves to its
    findings."""
    fmt = program_format(path)
    file = InputFile.open(path) if in_file and fmt == "pb" else None
    data = read_file_bytes(path) if file is None else _read_all(file, path)
    try:
        if fmt == "pb":
            with paused_gc():
                prog = protoread.decode(data, read_only, file)
        else:
            from . import textform
            prog = textform.loads(data)
        if validate:
            from ..ir.validate import validate_structure
            validate_structure(prog)
        return prog
    except ProgramFormatError as e:
        raise ProgramFormatError("%s: %s" % (path, e.message)) from None


# a binary program only read (check's) keeps where its ops' bytes are in its file when the file
# has this many bytes or more (a large trainer's ops are megabytes; a small program's are
# little, and a split of many small ones read at once would hold a descriptor each)
_IN_FILE_MIN = 1 << 20


def large_file(path: str) -> bool:
    """Whether a program only read from `path` is worth keeping in its file (load's
    in_file)."""
    try:
        return os.path.getsize(path) >= _IN_FILE_MIN
    except OSError:
        return False        # (read_file_bytes says why)


def _read_all(file: InputFile, path: str) -> bytes:
    try:
        return file.read_all()
    except ProgramFormatError as e:
        raise ProgramFormatError("cannot read %s: %s" % (path, e.message)) from None


def dumps(program: Program, fmt: str) -> bytes:
    if fmt == "pb":
        return to_bytes(program)
    from . import textform
    return textform.dumps(program).encode("utf-8")


def save(program: Program, path: str) -> None:
    """Write a program file atomically (temp file + rename)."""
    data = dumps(program, program_format(path))
    write_atomic(path, data)


def write_atomic(path: str, data: bytes) -> None:
    """Write `path` through a temporary file renamed into place; an error, Ctrl-C, SIGTERM or
    SIGHUP removes the temporary file."""
    from ..core.signals import terminate_as_interrupt
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.tmp%d" % (os.path.basename(path), os.getpid()))
    with terminate_as_interrupt():
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
