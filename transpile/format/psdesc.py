"""The parameter-server descriptor of Paddle 2.1+ (`PSParameter`, the_one_ps.proto) and its text.

The `ps` style writes, next to the programs, the text Paddle's `PsDescBuilder` hands the
brpc server and client (`worker_desc.txt`, `server_desc.txt`). The schema of
`paddle/fluid/distributed/the_one_ps.proto` (package `paddle.distributed`, Paddle 2.6) is kept
here as data and built with descriptor_pb2 in a pool of its own, as proto.py builds
framework.proto: no protoc, no Paddle import.

`to_text` prints a message the way protobuf 4.25's `text_format.MessageToString` does (what
Paddle 2.6 writes), whatever protobuf is installed: fields in field-number order, only those
set (set to their default counts as set), two spaces per level, enums by name, strings
C-escaped as ASCII, FLOAT fields as the shortest decimal that reads back as the same float32,
DOUBLE fields as Python's repr. `parse_text` reads such text (ours or Paddle's) back.
"""
from __future__ import annotations

import functools
import math
import re
import struct
from typing import Optional

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.descriptor import FieldDescriptor

from ..core.errors import UserError

PACKAGE = "paddle.distributed"
OPT, REQ, REP = 1, 2, 3
TYPES = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "bool": 8,
         "string": 9, "message": 11, "uint32": 13, "enum": 14}

# (message, [(field, number, label, type[, type name[, default]])], [(nested enum, values)])
MESSAGES = [
    ("FsClientParameter", [
        ("fs_type", 1, OPT, "enum", "FsClientParameter.FsApiType", "HDFS"),
        ("uri", 2, OPT, "string"), ("user", 3, OPT, "string"), ("passwd", 4, OPT, "string"),
        ("buffer_size", 5, OPT, "int32"), ("hadoop_bin", 51, OPT, "string"),
        ("afs_conf", 101, OPT, "string")], [("FsApiType", [("HDFS", 0), ("AFS", 1)])]),
    ("PSParameter", [
        ("worker_class", 1, OPT, "string"), ("server_class", 2, OPT, "string"),
        ("instance_class", 3, OPT, "string"), ("init_gflags", 4, OPT, "string", None, ""),
        ("worker_param", 101, OPT, "message", "WorkerParameter"),
        ("server_param", 102, OPT, "message", "ServerParameter"),
        ("trainer_param", 301, REP, "message", "DownpourTrainerParameter"),
        ("fs_client_param", 501, OPT, "message", "FsClientParameter")], []),
    ("WorkerParameter", [
        ("downpour_worker_param", 1, OPT, "message", "DownpourWorkerParameter")], []),
    ("DownpourWorkerParameter", [
        ("downpour_table_param", 1, REP, "message", "TableParameter")], []),
    ("DownpourServerParameter", [
        ("downpour_table_param", 1, REP, "message", "TableParameter"),
        ("service_param", 2, OPT, "message", "ServerServiceParameter")], []),
    ("ServerParameter", [
        ("downpour_server_param", 1, OPT, "message", "DownpourServerParameter")], []),
    ("DownpourTrainerParameter", [
        ("dense_table", 1, REP, "message", "DenseTableParameter"),
        ("sparse_table", 2, REP, "message", "SparseTableParameter"),
        ("push_sparse_per_batch", 3, OPT, "int32"), ("push_dense_per_batch", 4, OPT, "int32"),
        ("skip_op", 5, REP, "string"),
        ("program_config", 6, REP, "message", "ProgramConfig")], []),
    ("DenseTableParameter", [
        ("table_id", 1, OPT, "int32"), ("dense_variable_name", 2, REP, "string"),
        ("dense_gradient_variable_name", 3, REP, "string"), ("fea_dim", 4, OPT, "int32")], []),
    ("SparseTableParameter", [
        ("table_id", 1, OPT, "int32"), ("feature_dim", 2, OPT, "int32"),
        ("slot_key", 3, REP, "string"), ("slot_value", 4, REP, "string"),
        ("slot_gradient", 5, REP, "string")], []),
    ("ServerServiceParameter", [
        ("server_class", 1, OPT, "string", None, "BrpcPsServer"),
        ("client_class", 2, OPT, "string", None, "BrpcPsClient"),
        ("service_class", 3, OPT, "string", None, "BrpcPsService"),
        ("start_server_port", 4, OPT, "uint32", None, "0"),
        ("server_thread_num", 5, OPT, "uint32", None, "12")], []),
    ("ProgramConfig", [
        ("program_id", 1, REQ, "string"), ("push_sparse_table_id", 2, REP, "int32"),
        ("push_dense_table_id", 3, REP, "int32"), ("pull_sparse_table_id", 4, REP, "int32"),
        ("pull_dense_table_id", 5, REP, "int32")], []),
    ("TableParameter", [
        ("table_id", 1, OPT, "uint64"), ("table_class", 2, OPT, "string"),
        ("shard_num", 3, OPT, "uint64", None, "1000"),
        ("accessor", 4, OPT, "message", "TableAccessorParameter"),
        ("tensor", 5, OPT, "message", "TensorAccessorParameter"),
        ("common", 6, OPT, "message", "CommonAccessorParameter"),
        ("type", 7, OPT, "enum", "TableType"),
        ("compress_in_save", 8, OPT, "bool", None, "true"),
        ("graph_parameter", 9, OPT, "message", "GraphParameter"),
        ("enable_sparse_table_cache", 10, OPT, "bool", None, "true"),
        ("sparse_table_cache_rate", 11, OPT, "double", None, "0.00055000000000000003"),
        ("sparse_table_cache_file_num", 12, OPT, "uint32", None, "16"),
        ("enable_revert", 13, OPT, "bool", None, "false"),
        ("shard_merge_rate", 14, OPT, "float", None, "1")], []),
    ("TableAccessorParameter", [
        ("accessor_class", 1, OPT, "string"), ("fea_dim", 4, OPT, "uint32", None, "11"),
        ("embedx_dim", 5, OPT, "uint32", None, "8"),
        ("embedx_threshold", 6, OPT, "uint32", None, "10"),
        ("ctr_accessor_param", 7, OPT, "message", "CtrAccessorParameter"),
        ("table_accessor_save_param", 8, REP, "message", "TableAccessorSaveParameter"),
        ("embed_sgd_param", 10, OPT, "message", "SparseCommonSGDRuleParameter"),
        ("embedx_sgd_param", 11, OPT, "message", "SparseCommonSGDRuleParameter"),
        ("graph_sgd_param", 12, OPT, "message", "GraphSGDParameter")], []),
    ("GraphSGDParameter", [
        ("nodeid_slot", 1, OPT, "uint32", None, "9008"),
        ("feature_learning_rate", 2, OPT, "float", None, "0.0500000007")], []),
    ("CtrAccessorParameter", [
        ("nonclk_coeff", 1, OPT, "float", None, "0.100000001"),
        ("click_coeff", 2, OPT, "float", None, "1"),
        ("base_threshold", 3, OPT, "float", None, "1.5"),
        ("delta_threshold", 4, OPT, "float", None, "0.25"),
        ("delta_keep_days", 5, OPT, "float", None, "16"),
        ("show_click_decay_rate", 6, OPT, "float", None, "0.980000019"),
        ("delete_threshold", 7, OPT, "float", None, "0.800000012"),
        ("delete_after_unseen_days", 8, OPT, "float", None, "30"),
        ("ssd_unseenday_threshold", 9, OPT, "int32", None, "1"),
        ("show_scale", 10, OPT, "bool", None, "true"),
        ("zero_init", 11, OPT, "bool", None, "true"),
        ("load_filter_slots", 12, REP, "float"), ("save_filter_slots", 13, REP, "float")], []),
    ("TensorAccessorParameter", [
        ("feed_var_name", 1, OPT, "string"), ("fetch_var_name", 2, OPT, "string"),
        ("startup_program_id", 3, OPT, "int64"), ("main_program_id", 4, OPT, "int64"),
        ("tensor_table_class", 6, OPT, "string")], []),
    ("CommonAccessorParameter", [
        ("name", 1, OPT, "string"), ("table_name", 2, OPT, "string"),
        ("attributes", 3, REP, "string"), ("params", 4, REP, "string"),
        ("dims", 5, REP, "uint32"), ("initializers", 6, REP, "string"),
        ("entry", 7, OPT, "string"), ("trainer_num", 8, OPT, "int32"),
        ("sync", 9, OPT, "bool"), ("table_num", 10, OPT, "uint32"),
        ("table_dim", 11, OPT, "uint32"), ("attr", 12, OPT, "string")], []),
    ("TableAccessorSaveParameter", [
        ("param", 1, OPT, "uint32"), ("converter", 2, OPT, "string"),
        ("deconverter", 3, OPT, "string")], []),
    ("SparseCommonSGDRuleParameter", [
        ("name", 1, OPT, "string"),
        ("naive", 2, OPT, "message", "SparseNaiveSGDRuleParameter"),
        ("adagrad", 3, OPT, "message", "SparseAdagradSGDRuleParameter"),
        ("adam", 4, OPT, "message", "SparseAdamSGDParameter")], []),
    ("SparseNaiveSGDRuleParameter", [
        ("learning_rate", 1, OPT, "double", None, "0.050000000000000003"),
        ("initial_range", 2, OPT, "double", None, "0.0001"),
        ("weight_bounds", 3, REP, "float")], []),
    ("SparseAdagradSGDRuleParameter", [
        ("learning_rate", 1, OPT, "double", None, "0.050000000000000003"),
        ("initial_g2sum", 2, OPT, "double", None, "3"),
        ("initial_range", 3, OPT, "double", None, "0.0001"),
        ("weight_bounds", 4, REP, "float")], []),
    ("SparseAdamSGDParameter", [
        ("learning_rate", 1, OPT, "double", None, "0.001"),
        ("initial_range", 2, OPT, "double", None, "0.0001"),
        ("beta1_decay_rate", 3, OPT, "double", None, "0.90000000000000002"),
        ("beta2_decay_rate", 4, OPT, "double", None, "0.999"),
        ("ada_epsilon", 5, OPT, "double", None, "1e-08"),
        ("weight_bounds", 6, REP, "float")], []),
    ("GraphParameter", [
        ("task_pool_size", 1, OPT, "int32", None, "24"), ("edge_types", 2, REP, "string"),
        ("node_types", 3, REP, "string"), ("use_cache", 4, OPT, "bool", None, "false"),
        ("cache_size_limit", 5, OPT, "int32", None, "100000"),
        ("cache_ttl", 6, OPT, "int32", None, "5"),
        ("graph_feature", 7, REP, "message", "GraphFeature"),
        ("table_name", 8, OPT, "string", None, ""), ("table_type", 9, OPT, "string", None, ""),
        ("shard_num", 10, OPT, "int32", None, "127"),
        ("search_level", 11, OPT, "int32", None, "1"),
        ("build_sampler_on_cpu", 12, OPT, "bool", None, "true")], []),
    ("GraphFeature", [
        ("name", 1, REP, "string"), ("dtype", 2, REP, "string"), ("shape", 3, REP, "int32")],
     []),
    ("FLParameter", [
        ("fl_strategy", 1, OPT, "message", "FLStrategy"),
        ("client_info", 2, OPT, "message", "FLClientInfo")], []),
    ("FLStrategy", [
        ("iteration_num", 1, OPT, "uint64"), ("client_id", 2, OPT, "uint64"),
        ("next_state", 3, OPT, "string", None, "JOIN"),
        ("init_gflags", 4, OPT, "string", None, "")], []),
    ("FLClientInfo", [
        ("client_id", 1, OPT, "uint32"), ("device_type", 2, OPT, "string"),
        ("compute_capacity", 3, OPT, "int32"), ("bandwidth", 4, OPT, "int32"),
        ("local_training_result", 5, OPT, "message", "LocalTrainingResult"),
        ("init_gflags", 6, OPT, "string", None, "")], []),
    ("LocalTrainingResult", [("acc", 1, OPT, "double"), ("loss", 2, OPT, "double")], []),
]
ENUMS = [("TableType", [("PS_SPARSE_TABLE", 0), ("PS_DENSE_TABLE", 1), ("PS_OTHER_TABLE", 2)])]


def schema() -> descriptor_pb2.FileDescriptorProto:
    """the_one_ps.proto as a FileDescriptorProto."""
    f = descriptor_pb2.FileDescriptorProto(name="paddle/fluid/distributed/the_one_ps.proto",
                                           package=PACKAGE)
    for name, fields, enums in MESSAGES:
        m = f.message_type.add(name=name)
        for fname, number, label, ftype, *rest in fields:
            fd = m.field.add(name=fname, number=number, label=label, type=TYPES[ftype])
            if rest and rest[0]:
                fd.type_name = ".%s.%s" % (PACKAGE, rest[0])
            if len(rest) > 1:
                fd.default_value = rest[1]
        for ename, values in enums:
            e = m.enum_type.add(name=ename)
            for vname, number in values:
                e.value.add(name=vname, number=number)
    for ename, values in ENUMS:
        e = f.enum_type.add(name=ename)
        for vname, number in values:
            e.value.add(name=vname, number=number)
    return f


_pool = descriptor_pool.DescriptorPool()
_pool.Add(schema())
PSParameter = message_factory.GetMessageClass(_pool.FindMessageTypeByName(PACKAGE
                                                                          + ".PSParameter"))
TableParameter = message_factory.GetMessageClass(_pool.FindMessageTypeByName(
    PACKAGE + ".TableParameter"))
ServerServiceParameter = message_factory.GetMessageClass(_pool.FindMessageTypeByName(
    PACKAGE + ".ServerServiceParameter"))
FsClientParameter = message_factory.GetMessageClass(_pool.FindMessageTypeByName(
    PACKAGE + ".FsClientParameter"))
TABLE_TYPES = {name: number for name, number in ENUMS[0][1]}


# --- text ------------------------------------------------------------------------------------
_ESCAPES = {9: r"\t", 10: r"\n", 13: r"\r", 34: r"\"", 39: r"\'", 92: r"\\"}
_BYTE_TEXT = [_ESCAPES.get(b, chr(b) if 32 <= b < 127 else "\\%03o" % b) for b in range(256)]


def c_escape(text: str) -> str:
    """A string as text_format writes it between quotes (UTF-8 bytes, octal escapes)."""
    return "".join(_BYTE_TEXT[b] for b in text.encode("utf-8"))


def float32(x: float) -> float:
    """x rounded to float32 (what a FLOAT field holds), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def shortest_float(x: float) -> float:
    """The shortest decimal (6 significant digits or more) that reads back as float32 x (x
    itself when it is not finite, or no float32: 17 digits read back as any double)."""
    if not math.isfinite(x):
        return x
    precision = 6
    rounded = float("{0:.{1}g}".format(x, precision))
    while float32(rounded) != x and precision < 17:
        precision += 1
        rounded = float("{0:.{1}g}".format(x, precision))
    return rounded


@functools.lru_cache(maxsize=1 << 16)
def format_value(field, value) -> str:
    """One scalar value as text_format prints it (remembered: the tables of a descriptor
    repeat their names, rules and floats)."""
    cpp = field.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        v = field.enum_type.values_by_number.get(value)
        return v.name if v is not None else str(value)
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        return '"%s"' % c_escape(value)
    if cpp == FieldDescriptor.CPPTYPE_BOOL:
        return "true" if value else "false"
    if cpp == FieldDescriptor.CPPTYPE_FLOAT:
        return str(value) if math.isnan(value) else str(shortest_float(float32(value)))
    return str(value)


def is_repeated(field) -> bool:
    """A repeated field (protobuf 7 dropped FieldDescriptor.label for is_repeated)."""
    rep = getattr(field, "is_repeated", None)
    if rep is not None:
        return bool(rep)
    return field.label == FieldDescriptor.LABEL_REPEATED


def _lines(msg, indent: int, out: list, memo: Optional[dict] = None) -> None:
    pad = " " * indent
    for field, value in msg.ListFields():
        values = value if is_repeated(field) else [value]
        for v in values:
            if field.cpp_type != FieldDescriptor.CPPTYPE_MESSAGE:
                out.append("%s%s: %s\n" % (pad, field.name, format_value(field, v)))
            elif memo is None:
                out.append("%s%s {\n" % (pad, field.name))
                _lines(v, indent + 2, out)
                out.append("%s}\n" % pad)
            else:
                # a sub-message's text is decided by its type, its bytes and the indent: the
                # tables of a descriptor repeat theirs (accessors, rules) hundreds of times
                key = (field.message_type.full_name, v.SerializeToString(deterministic=True),
                       indent, field.name)
                text = memo.get(key)
                if text is None:
                    sub = ["%s%s {\n" % (pad, field.name)]
                    _lines(v, indent + 2, sub, memo)
                    sub.append("%s}\n" % pad)
                    text = memo[key] = "".join(sub)
                out.append(text)


def to_text(msg) -> str:
    """The message as protobuf 4.25's text_format.MessageToString prints it."""
    out: list = []
    _lines(msg, 0, out)
    return "".join(out)


def field_text(name: str, msg, indent: int, memo: Optional[dict] = None) -> str:
    """A message field `name { ... }` at `indent` spaces, as to_text prints it inside its
    parent: lets a writer print a sub-message once and use the text in many messages.
    `memo`: a dict kept across calls, where the text of each distinct sub-message is kept
    (for a writer printing many messages that share parts)."""
    out = ["%s%s {\n" % (" " * indent, name)]
    _lines(msg, indent + 2, out, memo)
    out.append("%s}\n" % (" " * indent))
    return "".join(out)


def parse_text(text: str, source: str = "descriptor"):
    """A PSParameter from its text; UserError naming `source` when it does not parse.

    Text laid out as text_format prints it (Paddle's and ours) is read table by table, each
    distinct table text parsed once (the descriptors of one split repeat their tables), and
    read a line at a time (_read_lines: protobuf's text parser, pure Python, takes 9 times as
    long over the 500 tables of a ctr model); any other layout is parsed as a whole."""
    msg = _parse_by_table(text)
    if msg is not None:
        return msg
    msg = PSParameter()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as e:
        raise UserError("%s: not a PSParameter text (%s)" % (source, e)) from None
    return msg


# the sections a descriptor has, as text_format lays them out: (opening lines, repeated field)
_SECTIONS = {"worker_param {\n": ("  downpour_worker_param {\n", "worker_param"),
             "server_param {\n": ("  downpour_server_param {\n", "server_param")}
_TABLE_OPEN, _SERVICE_OPEN, _SUB_CLOSE = ("    downpour_table_param {\n",
                                          "    service_param {\n", "    }\n")
_table_cache: dict = {}


def _parse_table(body: str, known: dict):
    msg = _table_cache.get(body)
    if msg is None:
        msg = TableParameter()
        if not _read_lines(body, msg, known):
            msg = TableParameter()
            text_format.Parse(body, msg)
        if len(_table_cache) > 4096:
            _table_cache.clear()
        _table_cache[body] = msg
    return msg


# a line of a message as text_format prints it: `name {` or `name: value`, the value one token
# to text_format's tokenizer (an identifier, a number, a double-quoted string of printable
# ASCII without escapes)
_LINE = re.compile(r' *([A-Za-z_]\w*)(?: (\{)|: ([A-Za-z_][\w+-]*|(?:[0-9+-]|\.[0-9])[\w.+-]*'
                   r'|"[ !#-\[\]-~]*"))', re.ASCII)
# integer field types: text_format.ParseInteger's is_signed, is_long
_INTEGERS = {FieldDescriptor.TYPE_INT32: (True, False), FieldDescriptor.TYPE_INT64: (True, True),
             FieldDescriptor.TYPE_UINT32: (False, False),
             FieldDescriptor.TYPE_UINT64: (False, True)}


def _value(field, token: str):
    """A value token as text_format reads it into `field` (with its own functions);
    ValueError where text_format refuses it, or reads it otherwise than this does."""
    kind = field.type
    if (token[0] == '"') != (kind == FieldDescriptor.TYPE_STRING):
        raise ValueError(token)
    if kind == FieldDescriptor.TYPE_STRING:
        return token[1:-1]
    if kind in _INTEGERS:
        return text_format.ParseInteger(token, *_INTEGERS[kind])
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return text_format.ParseFloat(token)
    if kind == FieldDescriptor.TYPE_BOOL:
        return text_format.ParseBool(token)
    if kind == FieldDescriptor.TYPE_ENUM:
        return text_format.ParseEnum(field, token)
    raise ValueError(token)


def _read_line(desc, line: str):
    """What _read_lines does with `line` inside a message of type `desc`: "" (nothing: a
    blank line), "}" (close the message), (field, None) (open the field's message),
    (field, value) (set or add the value), or None (leave the text to text_format: a line
    laid out otherwise, a field that is not `desc`'s or in a oneof, a value it refuses)."""
    m = _LINE.fullmatch(line)
    if m is None:
        rest = line.lstrip(" ")
        return rest if rest in ("", "}") else None
    name, opens, token = m.groups()
    field = desc.fields_by_name.get(name)
    if field is None or field.containing_oneof is not None or \
            (field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE) != bool(opens):
        return None
    try:
        return field, None if opens else _value(field, token)
    except ValueError:
        return None


def _read_lines(text: str, msg, known: dict) -> bool:
    """Read into the empty `msg` a message's text laid out as text_format prints it (a field
    or a closing brace a line), as text_format.Parse would: the same tokens, read by its own
    functions. Each distinct line is read once (`known`: (message type, line) -> _read_line;
    a descriptor's tables repeat most of their lines). False, `msg` then half read, where
    text_format could read the text some other way or refuse it (a field set twice as well):
    the caller then has text_format parse it."""
    stack = [msg]
    for line in text.split("\n"):
        cur = stack[-1]
        key = (cur.DESCRIPTOR, line)
        try:
            read = known[key]
        except KeyError:
            read = known[key] = _read_line(cur.DESCRIPTOR, line)
        if read is None:
            return False
        if read == "":
            continue
        if read == "}":
            if len(stack) == 1:
                return False
            stack.pop()
            continue
        field, value = read
        repeated = is_repeated(field)
        if not repeated and cur.HasField(field.name):
            return False
        try:
            if value is None and repeated:
                stack.append(getattr(cur, field.name).add())
            elif value is None:
                stack.append(getattr(cur, field.name))
                stack[-1].SetInParent()
            elif repeated:
                getattr(cur, field.name).append(value)
            else:
                setattr(cur, field.name, value)
        except (ValueError, TypeError):
            return False
    return len(stack) == 1


# line breaks str.splitlines knows besides "\n": a text holding one is parsed as a whole
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_TABLE_CLOSE = "\n" + _SUB_CLOSE
_SECTION_CLOSE = "  }\n}\n"


def _parse_by_table(text: str):
    """parse_text's fast path; None when the text is laid out otherwise (or does not parse:
    the whole-text parse then says where). The text is walked by position (a descriptor of
    thousands of tables is megabytes: never cut into lines as a whole)."""
    if _OTHER_BREAKS.search(text):
        return None
    msg = PSParameter()
    known: dict = {}
    at, n = 0, len(text)
    try:
        while at < n:
            head = next((h for h in _SECTIONS if text.startswith(h, at)), None)
            section = _SECTIONS.get(head)
            if section is None or not text.startswith(section[0], at + len(head)):
                return None
            outer = getattr(msg, section[1])
            inner = getattr(outer, "downpour_worker_param" if section[1] == "worker_param"
                            else "downpour_server_param")
            inner.SetInParent()
            at += len(head) + len(section[0])
            while True:
                table = text.startswith(_TABLE_OPEN, at)
                if not table and not text.startswith(_SERVICE_OPEN, at):
                    break
                start = at + len(_TABLE_OPEN if table else _SERVICE_OPEN)
                close = text.find(_TABLE_CLOSE, start - 1)
                if close < 0:
                    return None
                body = text[start:close + 1]
                if table:
                    inner.downpour_table_param.add().CopyFrom(_parse_table(body, known))
                else:
                    text_format.Parse(body, inner.service_param)
                    inner.service_param.SetInParent()
                at = close + len(_TABLE_CLOSE)
            if not text.startswith(_SECTION_CLOSE, at):
                return None
            at += len(_SECTION_CLOSE)
    except (ValueError, IndexError, text_format.ParseError):
        return None
    return msg


def as_dict(msg) -> dict:
    """The fields set in a message as plain data ({field: value or [values]}; enums by name,
    sub-messages as dicts): for comparing two descriptors field by field."""
    out: dict = {}
    for field, value in msg.ListFields():
        def plain(v, field=field):
            if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
                return as_dict(v)
            if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
                ev = field.enum_type.values_by_number.get(v)
                return ev.name if ev is not None else v
            return v
        if is_repeated(field):
            out[field.name] = [plain(v) for v in value]
        else:
            out[field.name] = plain(value)
    return out
