"""Reading ProgramDesc bytes into the model (transpile/ir/program.py).

The program is read piece by piece from its bytes, never as one message tree (about three times
the size of the bytes): each op and var keeps its own bytes (opsource.py). Whatever
that reading does not take, malformed or merely unusual bytes, is read again as one tree, which
says what is wrong, and where (wirecheck.py); but an op or var without a field framework.proto
requires, or an op without a type, is refused where the reading meets it (wireruns.py), as
Paddle's parser refuses it, before the rest of the program is read. One var or op from its
message: itemread.py.
"""
from __future__ import annotations

from ..core.errors import ProgramFormatError
from .opsource import SHAPE_ATTR, CutOpSource, OpSource, VarSource, vartype_key
from ..ir.program import Attr, Block, Op, Program, Var
from ..ir.vartable import VarTable, kind_code
from . import wirescan
from .itemread import (ATTRS_KEPT, decode_op, decode_var, decoded_attr, shared_names,
                       shared_role)
from .proto import (AttrMsg, BlockDescMsg, DecodeError, OpDescMsg, ProgramDesc, TextView,
                    VarDescMsg, VarTypeMsg, decode_vartype, optional_field, text_is_utf8,
                    where_malformed)
from .wirecheck import Located, first_incomplete, where_incomplete
from .wireruns import KEY_BLOCKS, KEY_OPS, KEY_VARS, fields, parse, runs, split_fields
from .textcheck import check_var_text, not_text
from .wire import NotPlain


class _Seen:
    """What the vars and ops of one program share, so that each is made once per program:
    `types`: VarType bytes -> (VarType, its part of var_key) (a VarType is never changed in
    place: Var.copy() copies it); `names`: attr names tuple -> (the tuple, {name: position});
    `roles`: op_role value -> its Attr (Attrs from OpSource.get are read-only);
    `role_bytes` / `shape_bytes`: an op_role / shape Attr message's bytes -> its Attr;
    `drop`: the name of an attr left out of every op, or None; `share`: decode's read_only
    (an op's OpSource holds the op's own slots rather than copies, a var has no source, a
    large block's vars are a VarTable: `kinds` and `kind_keys` its kinds of var, which the
    blocks of the program share)."""
    __slots__ = ("types", "names", "roles", "role_bytes", "shape_bytes", "drop", "share",
                 "file", "kinds", "kind_keys")

    def __init__(self, read_only: bool = False, file=None):
        self.types: dict = {}
        self.names: dict = {}
        self.roles: dict = {}
        self.role_bytes: dict = {}
        self.shape_bytes: dict = {}
        self.drop = UNREAD_ATTR if read_only else None
        self.share = read_only
        # the InputFile the bytes are read from (decode's `file`): ops keep where their bytes
        # are in it instead of the bytes
        self.file = file
        self.kinds: list = []
        self.kind_keys: dict = {}

    def table(self, vars_: dict):
        """The block's vars as a program only read keeps them (a VarTable, for a block of
        TABLE_MIN vars or more), else `vars_`."""
        if self.share and len(vars_) >= TABLE_MIN:
            return VarTable.of(vars_, self.kinds, self.kind_keys)
        return vars_


# a block of a program only read holds its vars in a VarTable from this many on (a smaller one:
# a dict of Vars, made in C; a pserver's hundreds of optimize blocks have a few vars each)
TABLE_MIN = 4096


def _add_var(vars_: dict, var: Var, block_idx: int) -> None:
    if var.name in vars_:
        raise ProgramFormatError("block %d declares var %r twice" % (block_idx, var.name))
    vars_[var.name] = var


def _has_unknown_fields(msg) -> bool:
    try:
        from google.protobuf import unknown_fields
        return len(unknown_fields.UnknownFieldSet(msg)) > 0
    except Exception:  # pragma: no cover - older runtimes
        return False


def _program_fields(msg) -> dict:
    """Program's keyword arguments other than the blocks, from a ProgramDesc message (the
    whole program, or only its fields other than the blocks)."""
    version = None
    has_version = msg.HasField("version")
    if has_version:
        version = optional_field(msg.version, "version")
    ovm = None
    if msg.HasField("op_version_map"):
        ovm = [(p.op_name, p.op_version.version) for p in msg.op_version_map.pair]
        if any(type(name) is not str for name, _ in ovm):
            raise not_text("an op name in op_version_map")
    return {"version": version, "has_version": has_version, "op_version_map": ovm}


# the attr a program only read (decode's read_only) leaves out of its ops, as if the file had
# none: each op's Python call stack, most of the bytes of a program Paddle saved
UNREAD_ATTR = "op_callstack"


def decode(data: bytes, read_only: bool = False, file=None) -> Program:
    """Parse ProgramDesc bytes into a Program. Raises ProgramFormatError on anything unusable.
    `read_only`: a program only looked at, never written (check's), kept small: its ops
    without UNREAD_ATTR, each OpSource holding its op's slots (not copies: nothing changes
    them), its vars without sources (no bytes to copy).

    The program is read piece by piece from its bytes (_decode_pieces), never as one message
    tree (about three times the size of the bytes). Whatever that reading does not take,
    malformed or merely unusual bytes, is read again as one tree (_decode_tree), which says
    what is wrong exactly as it always did, or reads what is unusual but valid.

    `file`: the opsource.InputFile `data` was read from (all of it): the ops read piece by
    piece keep where their bytes are in it instead of the bytes."""
    if not data:
        raise ProgramFormatError("empty file: no ProgramDesc bytes")
    try:
        prog = _decode_pieces(data, read_only, file)
    except Located:
        raise
    except (NotPlain, ProgramFormatError):
        prog = _decode_tree(data, read_only)
    finally:
        if wirescan.FAST is not None:
            wirescan.FAST.forget()      # the strings it shared while reading this program
    return prog


# ----------------------------------------------------------------------------------------------
# reading piece by piece

def _decode_pieces(data: bytes, read_only: bool = False, file=None) -> Program:
    """The program read block by block, its vars and ops a run of about _RUN_BYTES at a time:
    the only message trees made are those of one run. Raises NotPlain or ProgramFormatError
    on anything _decode_tree is to look at."""
    blocks, rest = split_fields(data, 0, len(data), (KEY_BLOCKS,))
    rest_msg = parse(ProgramDesc, rest)
    parse(TextView, rest)
    if not blocks or _has_unknown_fields(rest_msg):
        raise NotPlain()
    fields = _program_fields(rest_msg)
    seen = _Seen(read_only, file)
    return Program([_decode_block_bytes(data, start, end, seen, n)
                    for n, (_, _, start, end) in enumerate(blocks)], **fields)


def _decode_block_bytes(data: bytes, start: int, end: int, seen: _Seen, n: int) -> Block:
    """The Block whose BlockDesc is data[start:end] (the file's block `n`): its own fields
    (idx...) parsed alone, its vars and ops by the compiled scanner (_decode_scanned) when it
    is there and takes them, else run by run (wireruns.py), which says where an item lacks
    a required field or an op its type (Located)."""
    if wirescan.FAST is not None:
        if seen.share and seen.file is not None and end - start >= 2 * WINDOW:
            block = _decode_windows(data, start, end, seen)
            if block is not None:
                return block
        # with a file, the scanner says where each op is in `data` (the file's bytes) instead
        # of copying its bytes (_ops_scanned)
        scanned = wirescan.FAST.block(data, start, end, seen.drop, seen.share, 0,
                                      seen.file is not None)
        if scanned is not None:
            try:
                return _decode_scanned(*scanned, seen)
            except ProgramFormatError:
                pass                    # read again run by run: it says where
    rest: list = []
    vars_: dict = {}
    ops: list = []
    for run in runs(data, fields(data, start, end, (KEY_VARS, KEY_OPS), rest)):
        if run.key == KEY_VARS:     # (an error but Located: _decode_tree says it again)
            for v, wire in zip(*run.items(data, n, len(vars_))):
                _add_var(vars_, decode_var(v, seen, wire), n)
            continue
        msgs, wires = run.items(data, n, len(ops))
        try:
            ops += [decode_op(o, False, seen, wire) for o, wire in zip(msgs, wires)]
        except ProgramFormatError:
            run.refuse_typeless(data, n, len(ops), msgs)
            raise
    head = parse(BlockDescMsg, b"".join(rest))
    return Block(head.idx, head.parent_idx, seen.table(vars_), ops,
                 forward_block_idx=optional_field(head, "forward_block_idx"))


def _decode_scanned(rest: bytes, var_items: list, op_items: list, seen: _Seen) -> Block:
    """The Block from what wirescan_c.block() read of it: its other fields' bytes, and a tuple
    for each var and op (see wirescan_c.c: take_var, take_op), or the item's bytes alone where
    protobuf is to read it (a var with attrs, an op that repeats a name). Every item is
    protobuf's own serialization of itself: its bytes are its wire, as in _run_items.
    With seen.file, an op tuple's first item is where its bytes are in the file (block()'s
    `placed`: (start, end), or ((start, end), the span of seen.drop's entry from start))."""
    head = parse(BlockDescMsg, rest)
    ops: list = []
    _ops_scanned(op_items, seen, ops.append)
    return Block(head.idx, head.parent_idx, _some_vars(var_items, seen, head.idx), ops,
                 forward_block_idx=optional_field(head, "forward_block_idx"))


def _some_vars(var_items: list, seen: _Seen, idx: int):
    """The vars of block `idx` from wirescan_c.block()'s var items: a VarTable (a program only
    read, TABLE_MIN vars or more), else {name: Var}."""
    types = seen.types
    if seen.share and len(var_items) >= TABLE_MIN:
        return _table_scanned(var_items, types, seen, idx)
    if not var_items:
        return {}           # (a pserver's optimize blocks: hundreds per program, no vars)
    # the Vars made in C where the module can, as _vars_scanned makes them (which says what is
    # wrong with a name declared twice: vars_of returns None)
    vars_of = getattr(wirescan.FAST, "vars_of", None)
    vars_ = None if vars_of is None else vars_of(
        var_items, types, lambda raw: _typed(raw, types),
        lambda item: decode_var(VarDescMsg.FromString(item), seen, item), Var,
        None if seen.share else VarSource)
    return _vars_scanned(var_items, types, seen, idx) if vars_ is None else vars_


def _ops_scanned(op_items: list, seen: _Seen, add) -> None:
    """add(Op) for each of wirescan_c.block()'s op items, in order (with seen.file, each
    scanned with block()'s `placed`: where it is in the file)."""
    shared = seen.names
    role_bytes, shape_bytes = seen.role_bytes, seen.shape_bytes
    file = seen.file
    for item in op_items:
        if item.__class__ is bytes:
            add(decode_op(OpDescMsg.FromString(item), False, seen, item))
            continue
        wire, op_type, inputs, outputs, read_inputs, read_outputs, is_target, names, role, \
            shape, block_attrs = item
        found = shared.get(names)
        if found is None:
            found = shared_names(names, shared)
        if role is not None:
            attr = role_bytes.get(role)
            role = attr if attr is not None else _attr_from_bytes(
                role, role_bytes, lambda a: shared_role(a, seen))
        if shape is not None:
            attr = shape_bytes.get(shape)
            shape = {SHAPE_ATTR: attr if attr is not None
                     else _attr_from_bytes(shape, shape_bytes, decoded_attr)}
        if file is None:
            at = None
        elif wire[0].__class__ is int:              # (start, end) in the file
            at = (file, *wire)
        else:                                       # and the span of the attr cut out
            at = ((file, *wire[0]), wire[1])
        if at is not None and at[0].__class__ is tuple:
            src = CutOpSource(at[0], at[1], op_type, (read_inputs, read_outputs), is_target,
                              found, block_attrs, role, shape)
        else:
            src = OpSource(wire if at is None else at, op_type, (read_inputs, read_outputs),
                           is_target, found, block_attrs, role, shape)
        add(Op(op_type, inputs, outputs, None, is_target, source=src))


# a block of a program only read whose ops are in its file, of twice this many bytes or more, is
# scanned a window of about this many bytes at a time (_decode_windows)
WINDOW = 1 << 18


def _decode_windows(data: bytes, start: int, end: int, seen: _Seen):
    """_decode_scanned of the block data[start:end] of a program only read whose ops are in
    its file, window by window: what wirescan_c.block() makes of one window (a tuple per var
    and op, each op's place in the file) taken before the next window's is made, rather than
    those of the whole block at once (a trainer's tens of thousands of vars and thousands of
    ops: megabytes made at once, and holes among what is kept once freed). None where a
    window is not scanned or not taken: the block is then read whole, which says why."""
    rest, var_items, codes, ops = [], [], {}, []
    at = start
    try:
        while at < end:
            scanned = wirescan.FAST.block(data, at, end, seen.drop, True, WINDOW, True)
            if scanned is None:
                return None
            part, window_vars, op_items, at = scanned
            rest.append(part)
            var_items += window_vars
            if codes or len(var_items) >= TABLE_MIN:    # a VarTable's codes, as they come
                _add_codes(var_items, codes, seen, -1)
                var_items = []
            _ops_scanned(op_items, seen, ops.append)
        head = parse(BlockDescMsg, b"".join(rest))
        vars_ = VarTable(codes, seen.kinds) if codes else _some_vars(var_items, seen, head.idx)
    except ProgramFormatError:
        return None
    return Block(head.idx, head.parent_idx, vars_, ops,
                 forward_block_idx=optional_field(head, "forward_block_idx"))


def _vars_scanned(var_items: list, types: dict, seen: _Seen, idx: int) -> dict:
    """The vars of block `idx` from wirescan_c.block()'s var items: {name: Var}."""
    vars_: dict = {}
    for item in var_items:
        if item.__class__ is bytes:
            var = decode_var(VarDescMsg.FromString(item), seen, item)
            name = var.name
        else:
            wire, name, raw, p, c, i, s = item
            typed = types.get(raw) or _typed(raw, types)
            var = Var(name, typed[0], p, c, i, s, (), None if seen.share else
                      VarSource(wire, (name, p, c, i, s, (), typed[1])))
        if name in vars_:           # declared twice: _add_var raises (inline: every var)
            _add_var(vars_, var, idx)
        vars_[name] = var
    return vars_


def _table_scanned(var_items: list, types: dict, seen: _Seen, idx: int) -> VarTable:
    """The vars of block `idx` of a program only read (seen.share), from wirescan_c.block()'s
    var items: a VarTable, no Var made but for a var with attrs (read by protobuf)."""
    codes: dict = {}
    _add_codes(var_items, codes, seen, idx)
    return VarTable(codes, seen.kinds)


def _add_codes(var_items: list, codes: dict, seen: _Seen, idx: int) -> None:
    """Each var item's name and kind in `codes` (a VarTable's), in order."""
    kinds, keys, types = seen.kinds, seen.kind_keys, seen.types
    for item in var_items:
        if item.__class__ is bytes:
            var = decode_var(VarDescMsg.FromString(item), seen, item)
            name = var.name
            code = kind_code((var.type, var.persistable, var.need_check_feed,
                              var.is_parameter, var.stop_gradient, var.attrs), kinds, keys)
        else:
            _, name, raw, p, c, i, s = item
            code = keys.get((raw, p, c, i, s))
            if code is None:
                typed = types.get(raw) or _typed(raw, types)
                code = keys[(raw, p, c, i, s)] = kind_code((typed[0], p, c, i, s, ()),
                                                            kinds, keys)
        if name in codes:           # declared twice: read again run by run, which says so
            raise ProgramFormatError("block %d declares var %r twice" % (idx, name))
        codes[name] = code


def _typed(raw: bytes, types: dict) -> tuple:
    """(VarType, its key) of a VarType's bytes, made once per program (`types`)."""
    vt = decode_vartype(VarTypeMsg.FromString(raw))
    typed = types[raw] = (vt, vartype_key(vt))
    return typed


def _attr_from_bytes(raw: bytes, made: dict, decode) -> Attr:
    """attr_by_bytes for an Attr message's bytes (not yet in `made`)."""
    if len(made) >= ATTRS_KEPT:
        made.clear()
    attr = made[raw] = decode(AttrMsg.FromString(raw))
    return attr


# ----------------------------------------------------------------------------------------------
# reading as one message tree: what is not read piece by piece

def _decode_block(b, check_text: bool, seen: _Seen) -> Block:
    """A Block from its message (its vars' and ops' bytes serialized again)."""
    vars_ = {}
    for v in b.vars:
        if check_text:
            check_var_text(v, b.idx)
        _add_var(vars_, decode_var(v, seen, None), b.idx)
    return Block(b.idx, b.parent_idx, seen.table(vars_),
                 [decode_op(o, check_text, seen, None) for o in b.ops],
                 forward_block_idx=optional_field(b, "forward_block_idx"))


def _decode_tree(data: bytes, read_only: bool = False) -> Program:
    """The program parsed as one message tree: errors (the first in the file) as they were
    always reported; valid bytes that _decode_pieces leaves alone read all the same."""
    msg = ProgramDesc()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        where = where_malformed(data)
        if not where:
            where = " (%s)" % (str(e).split(": ")[-1] or type(e).__name__)
        raise ProgramFormatError("not a valid ProgramDesc%s" % where) from None
    if _has_unknown_fields(msg):
        raise ProgramFormatError("not a ProgramDesc: it holds fields that framework.proto "
                                 "does not define%s" % where_malformed(data))
    if not msg.blocks:
        raise ProgramFormatError("not a ProgramDesc: it has no blocks")
    incomplete = first_incomplete(msg)
    if incomplete is not None:
        raise ProgramFormatError("not a valid ProgramDesc: %s" % where_incomplete(
            data, ProgramDesc.DESCRIPTOR, *incomplete))
    # all text is checked by one C parse; field by field only to say where it fails
    check_text = not text_is_utf8(data)
    seen = _Seen(read_only)
    try:
        fields = _program_fields(msg)
        blocks = [_decode_block(b, check_text, seen) for b in msg.blocks]
        if check_text:
            raise not_text("a text field")
    except ProgramFormatError as e:
        if not check_text:
            raise
        raise ProgramFormatError(e.message + where_malformed(data, text=True)) from None
    return Program(blocks, **fields)
