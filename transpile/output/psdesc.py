"""worker_desc.txt and server_desc.txt: the PSParameter text of PsDescBuilder
(paddle/distributed/ps/the_one_ps.py), from the ps plan's tables.

A trainer's worker desc lists the tables twice, under worker_param and under server_param (the
dense table's dims computed with the trainer's id both times), then the service; a pserver's
server desc only the server half, its dims by its place in the endpoint list. Both end with
the fs client (fs_client_param) when the config sets one. Fields are set
in the order and with the values Paddle sets them; format/psdesc.py prints the text.
"""
from __future__ import annotations

from typing import Optional

from ..format.psdesc import (TABLE_TYPES, FsClientParameter, ServerServiceParameter,
                             TableParameter, field_text)
from ..plan.ps import PsPlan
from ..plan.ps_tables import PsTable

SERVICE = (("server_class", "BrpcPsServer"), ("client_class", "BrpcPsClient"),
           ("service_class", "BrpcPsService"), ("start_server_port", 0),
           ("server_thread_num", 12))
TABLE_TYPE = {"sparse": "PS_SPARSE_TABLE", "dense": "PS_DENSE_TABLE",
              "datanorm": "PS_DENSE_TABLE", "barrier": "PS_OTHER_TABLE"}


def set_fields(msg, values: dict) -> None:
    """Set every field of `values` ({field: value}; a sub-message a dict, a repeated field a
    list) in `msg`: what Paddle's copy of the strategy's accessor sets."""
    for name, value in values.items():
        if isinstance(value, dict):
            getattr(msg, name).SetInParent()
            set_fields(getattr(msg, name), value)
        elif isinstance(value, list):
            rep = getattr(msg, name)
            for v in value:
                if isinstance(v, dict):
                    set_fields(rep.add(), v)
                else:
                    rep.append(v)
        else:
            setattr(msg, name, value)


def fill_table(msg, t: PsTable, n_ps: int, role_id: int) -> None:
    """One downpour_table_param."""
    if t.empty:
        return
    msg.table_id = t.table_id
    msg.table_class = t.table_class
    msg.shard_num = t.shard_num
    msg.type = TABLE_TYPES[TABLE_TYPE[t.kind]]
    acc = msg.accessor
    if t.settings is not None:
        for name, value in t.settings.table_fields:
            setattr(msg, name, value)
        set_fields(acc, t.settings.accessor)
    else:
        acc.accessor_class = t.accessor_class
        acc.fea_dim = t.fea_dim
        acc.embedx_dim = t.embedx_dim
    c = msg.common
    c.name = t.rule
    c.table_name = t.table_name
    if t.kind == "barrier":
        c.sync = t.sync
        c.entry = t.entry
        c.trainer_num = t.trainer_num
        return
    c.params.extend(t.params)
    c.dims.extend(t.dims(n_ps, role_id))
    c.initializers.extend(t.initializers)
    c.entry = t.entry
    c.trainer_num = t.trainer_num
    c.sync = t.sync
    c.table_num = t.table_num
    c.table_dim = t.table_dim
    c.attr = t.attr


def _service_text() -> str:
    msg = ServerServiceParameter()
    for name, value in SERVICE:
        setattr(msg, name, value)
    return field_text("service_param", msg, 4)


def _fs_client_text(param) -> str:
    """fsClient._set: the four fields when the strategy's fs_client_param is set."""
    if not param:
        return ""
    msg = FsClientParameter()
    for name in ("uri", "user", "passwd", "hadoop_bin"):
        setattr(msg, name, param[name])
    return field_text("fs_client_param", msg, 0)


class DescWriter:
    """The descriptors of one plan. Each table is printed once and its text reused: only the
    dense tables' dims depend on the role, and a split to many servers would otherwise print
    every sparse table once per server and twice per trainer. The text is what to_text prints
    for the whole PSParameter (format/psdesc.py's field_text is the same printer).

    The descriptors are made as UTF-8 pieces (*_pieces, written one after the other): the
    tables between two dense tables are one piece, encoded once for every descriptor, so a
    server's descriptor (megabytes of sparse tables at many tables) costs writing its bytes."""

    def __init__(self, plan: PsPlan):
        self.plan = plan
        self.n_ps = len(plan.endpoints)
        self._texts: dict = {}
        self._memo: dict = {}           # field_text's: each distinct sub-message printed once
        self._runs: Optional[list] = None
        self._service = _service_text().encode("utf-8")
        self._fs_client = _fs_client_text(plan.fs_client_param).encode("utf-8")

    def _table(self, t: PsTable, role_id: int) -> str:
        key = (t.table_id, role_id if t.is_dense else None)
        text = self._texts.get(key)
        if text is None:
            msg = TableParameter()
            fill_table(msg, t, self.n_ps, role_id)
            text = self._texts[key] = field_text("downpour_table_param", msg, 4, self._memo)
        return text

    def _tables(self, role_id: int) -> list:
        """The tables' text as UTF-8 pieces: each run of tables that are the same for every
        role one piece (made once), each dense table its own."""
        if self._runs is None:
            runs: list = []
            for t in self.plan.tables:
                if t.is_dense:
                    runs.append(t)
                elif runs and isinstance(runs[-1], list):
                    runs[-1].append(t)
                else:
                    runs.append([t])
            self._runs = [r if not isinstance(r, list) else
                          "".join(self._table(t, 0) for t in r).encode("utf-8") for r in runs]
        return [r if r.__class__ is bytes else self._table(r, role_id).encode("utf-8")
                for r in self._runs]

    def worker_desc_pieces(self, trainer_id: int) -> list:
        """build_worker_desc() of trainer `trainer_id`, as UTF-8 pieces."""
        tables = self._tables(trainer_id)
        return [b"worker_param {\n  downpour_worker_param {\n", *tables,
                b"  }\n}\nserver_param {\n  downpour_server_param {\n", *tables,
                self._service, b"  }\n}\n", self._fs_client]

    def server_desc_pieces(self, endpoint: str) -> list:
        """build_server_desc() of the pserver at `endpoint`, as UTF-8 pieces."""
        return [b"server_param {\n  downpour_server_param {\n",
                *self._tables(self.plan.server_index(endpoint)),
                self._service, b"  }\n}\n", self._fs_client]

    def worker_desc(self, trainer_id: int) -> str:
        """build_worker_desc() of trainer `trainer_id`."""
        return b"".join(self.worker_desc_pieces(trainer_id)).decode("utf-8")

    def server_desc(self, endpoint: str) -> str:
        """build_server_desc() of the pserver at `endpoint`."""
        return b"".join(self.server_desc_pieces(endpoint)).decode("utf-8")


def worker_desc(plan: PsPlan, trainer_id: int) -> str:
    """build_worker_desc() of trainer `trainer_id`."""
    return DescWriter(plan).worker_desc(trainer_id)


def server_desc(plan: PsPlan, endpoint: str) -> str:
    """build_server_desc() of the pserver at `endpoint`."""
    return DescWriter(plan).server_desc(endpoint)
