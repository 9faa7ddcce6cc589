"""Every field of a ps descriptor, checked.

  fields    each table of each descriptor, field by field, against the table Paddle's
            PsDescBuilder makes of the original program and the config (plan/ps_tables.py's
            describe_table, set into a message as output/psdesc.py does): class, shard_num,
            accessor, rules and their parameters, thresholds, cache settings, the common
            part (rule inputs, dims, initializers, attrs, entry, ...). An unset field counts
            as its default. A difference is a finding naming the table, the field, and where
            the expected value comes from (the config's key, the program, Paddle's default).
            Without --startup the values Paddle reads off the startup program are not
            checked. The fields ps.py's table checks already judge are left to them.
  settings  what the user chose, for consistency (core/ps_lint.py): the server registers the
            table class, accessor and rules; a rule has the parameters it reads; weight
            bounds are two ordered numbers; thresholds are not negative, rates in range.
  service   service_param is BrpcPsServer's (as Service._set writes it), fs_client_param is
            the config's (or absent), and a descriptor sets nothing else at the top level.
"""
from __future__ import annotations

from typing import Optional

from google.protobuf.descriptor import FieldDescriptor

from ..core.errors import RefusedError
from ..format.psdesc import TableParameter, as_dict, format_value, is_repeated
from ..ir.program import Program
from ..output.psdesc import SERVICE, fill_table
from ..plan.ps_tables import TableSources, barrier_table, describe_table
from ..core.ps_lint import table_problems

# the fields ps.py's table checks judge (with their own messages), per kind of table
_COMMON = {"type", "table_id", "common.table_name", "common.name", "common.trainer_num",
           "common.sync"}
COVERED = {"sparse": _COMMON | {"accessor.accessor_class", "accessor.fea_dim",
                                "accessor.embedx_dim", "common.table_num", "common.table_dim"},
           "dense": _COMMON | {"accessor.fea_dim", "common.table_num"},
           "datanorm": _COMMON | {"accessor.fea_dim", "common.table_num"},
           "barrier": {"table_id", "table_class", "common.table_name", "common.trainer_num",
                       "common.sync"}}
# the rule inputs whose dims are the table's dim or the server's dense shard (ps.py checks them)
DENSE_SHARDED = ("Param", "Moment1", "Moment2", "D2Sum", "G2Sum", "Moment")
TOP_FIELDS = ("worker_param", "server_param", "fs_client_param")


def expected_tables(ctx, expect) -> Optional[list]:
    """The PsTables Paddle would describe for the original (None, with a warning, where it
    would refuse the program: then only the structural checks run)."""
    startup = ctx.startup
    try:
        index = TableSources(expect.main, startup if startup is not None else Program.empty(),
                            expect.opt)
        entries = ctx.config.strategy_tables()
        tables = [describe_table(c, expect.main, index, ctx.config, entries,
                                 startup_known=startup is not None) for c in expect.ctxs]
    except RefusedError as e:
        ctx.warn("tables", "split", None, None, "the descriptors' fields are not checked: "
                 "Paddle would refuse this program and config (%s)" % e)
        return None
    return tables + [barrier_table(len(expect.ctxs), ctx.config)]


def _scalar(field, v) -> str:
    if is_repeated(field):
        return "[%s]" % ", ".join(format_value(field, x) for x in v)
    return format_value(field, v)


def diff_messages(got, want, path: str = "") -> list:
    """[(path, field, got, want)] of every field that differs (unset = its default)."""
    out = []
    for field in want.DESCRIPTOR.fields:
        p = path + field.name
        a, b = getattr(got, field.name), getattr(want, field.name)
        if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
            if is_repeated(field):
                if len(a) != len(b):
                    out.append((p, None, "%d entries" % len(a), "%d" % len(b)))
                    continue
                for i, (x, y) in enumerate(zip(a, b)):
                    out += diff_messages(x, y, "%s[%d]." % (p, i))
            elif got.HasField(field.name) or want.HasField(field.name):
                out += diff_messages(a, b, p + ".")
        elif (list(a) if is_repeated(field) else a) != (list(b) if is_repeated(field) else b):
            out.append((p, field, a, b))
    return out


def _origin(t, path: str):
    """(kind, text) of where the expected value of `path` comes from."""
    st = t.settings
    if st is not None:
        key = tuple(int(x) if x.isdigit() else x
                    for x in path.replace("[", ".").replace("]", "").split("."))
        if key in st.origins:
            return st.origins[key]
    if path == "common.initializers":
        fixed = "; Param's, which Paddle leaves empty, `paddle_faults: fix`'s" \
            if t.empty_inits and "" not in t.initializers else ""
        return ("startup", "the startup program's initializers of %s's inputs%s"
                % (t.rule, fixed)) if t.rule else ("default", "none")
    if path.startswith("common."):
        return "program", "the table's optimizer (%s) and the config" % (t.optimizer or "none")
    what = {"sparse": "GeoSparseTable" if t.settings is None else "SparseTable",
            "dense": "DenseTable", "datanorm": "DenseTable", "barrier": "BarrierTable"}
    return "default", "Paddle's %s" % what.get(t.kind, "table")


class FieldChecker:
    """Expected messages per table and role, made once."""

    def __init__(self, ctx, tables: list, n_ps: int):
        self.ctx, self.tables, self.n_ps = ctx, tables, n_ps
        self.startup_known = ctx.startup is not None
        self._msgs: dict = {}
        self._seen: set = set()

    def expected(self, k: int, role: int):
        """(message, its bytes) of table `k` as role `role`'s descriptor holds it."""
        t = self.tables[k]
        key = (k, role if t.is_dense else None)
        made = self._msgs.get(key)
        if made is None:
            msg = TableParameter()
            fill_table(msg, t, self.n_ps, role)
            made = self._msgs[key] = (msg, msg.SerializeToString(deterministic=True))
        return made

    def check(self, part: str, role: int, k: int, actual, name: str) -> None:
        """Every field of table `k` of a descriptor against the expected one."""
        if k >= len(self.tables):
            return
        t = self.tables[k]
        want, want_bytes = self.expected(k, role)
        if actual.SerializeToString(deterministic=True) == want_bytes:
            return
        skip = COVERED.get(t.kind, ())
        for path, field, got, exp in diff_messages(actual, want):
            if path in skip:
                continue
            kind, why = _origin(t, path)
            if kind == "startup" and not self.startup_known:
                continue
            if path == "common.dims":
                got, exp = self._dims(actual, got, exp)
                if got == exp:
                    continue
            shown = (_scalar(field, got), _scalar(field, exp)) if field is not None \
                else (got, exp)
            self.ctx.add("tables", part, None, None, "%s: %s is %s" % (name, path, shown[0]),
                         "%s (%s)" % (shown[1], why))

    @staticmethod
    def _dims(actual, got, exp):
        """common.dims without the sharded inputs' (ps.py judges those)."""
        params = list(actual.common.params)
        keep = [i for i in range(max(len(got), len(exp)))
                if i >= len(params) or params[i] not in DENSE_SHARDED]
        return ([got[i] for i in keep if i < len(got)], [exp[i] for i in keep if i < len(exp)])

    @staticmethod
    def problems(actual) -> list:
        """[(key, problem)] of the consistency of a sparse table's settings."""
        if actual.type != 0 or actual.table_class == "MemorySparseGeoTable":
            return []
        return table_problems(as_dict(actual), "")

    def settings(self, part: str, k: int, problems: list, name: str) -> None:
        """The problems() of table `k`, each said once (at the first descriptor that has it)."""
        for key, problem in problems:
            if (k, key, problem) in self._seen:
                continue
            self._seen.add((k, key, problem))
            self.ctx.add("tables", part, None, None, "%s: %s: %s" % (name, key.lstrip("."),
                                                                  problem),
                         "a setting Paddle 2.6.2's server can run")


def check_top(ctx, part: str, d) -> None:
    """service_param, fs_client_param and nothing else at the top of a descriptor."""
    for field, _ in d.ListFields():
        if field.name not in TOP_FIELDS:
            ctx.add("tables", part, None, None, "%s is set" % field.name,
                    "nothing but %s" % ", ".join(TOP_FIELDS))
    svc = d.server_param.downpour_server_param.service_param
    for name, value in SERVICE:
        if getattr(svc, name) != value:
            ctx.add("tables", part, None, None, "service_param.%s is %r" % (
                name, getattr(svc, name)), "%r (Paddle's Service)" % (value,))
    want = ctx.config.fs_client() or {}
    got = as_dict(d.fs_client_param) if d.HasField("fs_client_param") else {}
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            ctx.add("tables", part, None, None, "fs_client_param.%s is %s" % (
                key, "unset" if key not in got else repr(got[key])),
                "%s (the config's fs_client_param)" % (
                    "unset" if key not in want else repr(want[key])))
