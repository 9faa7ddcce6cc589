"""worker_desc.txt and server_desc.txt: the PSParameter text of PsDescBuilder
(paddle/distributed/ps/the_one_ps.py), from the ps plan's tables.

A trainer's worker desc lists the tables twice, under worker_param and under server_param (the
dense table's dims computed with the trainer's id both times), then the service; a pserver's
server desc only the server half, its dims by its place in the endpoint list. Fields are set
in the order and with the values Paddle sets them; format/psdesc.py prints the text.
"""
from __future__ import annotations

from ..format.psdesc import (TABLE_TYPES, ServerServiceParameter, TableParameter,
                             field_text)
from ..plan.ps import PsPlan
from ..plan.ps_tables import CTR_ACCESSOR, WEIGHT_BOUNDS, PsTable

SERVICE = (("server_class", "BrpcPsServer"), ("client_class", "BrpcPsClient"),
           ("service_class", "BrpcPsService"), ("start_server_port", 0),
           ("server_thread_num", 12))
TABLE_TYPE = {"sparse": "PS_SPARSE_TABLE", "dense": "PS_DENSE_TABLE",
              "datanorm": "PS_DENSE_TABLE", "barrier": "PS_OTHER_TABLE"}


def _sgd_rule(msg, t: PsTable) -> None:
    r = t.sgd_rule
    msg.name = r.name
    msg.adam.learning_rate = r.learning_rate
    msg.adam.initial_range = r.initial_range
    msg.adam.beta1_decay_rate = r.beta1_decay_rate
    msg.adam.beta2_decay_rate = r.beta2_decay_rate
    msg.adam.ada_epsilon = r.ada_epsilon
    msg.adam.weight_bounds.extend(WEIGHT_BOUNDS)


def fill_table(msg, t: PsTable, n_ps: int, role_id: int) -> None:
    """One downpour_table_param."""
    if t.empty:
        return
    msg.table_id = t.table_id
    msg.table_class = t.table_class
    msg.shard_num = t.shard_num
    msg.type = TABLE_TYPES[TABLE_TYPE[t.kind]]
    if t.cache_file_num is not None:
        msg.sparse_table_cache_file_num = t.cache_file_num
    acc = msg.accessor
    acc.accessor_class = t.accessor_class
    acc.fea_dim = t.fea_dim
    acc.embedx_dim = t.embedx_dim
    if t.embedx_threshold is not None:
        acc.embedx_threshold = t.embedx_threshold
        acc.graph_sgd_param.nodeid_slot = 9008
        acc.graph_sgd_param.feature_learning_rate = 0.05
        ctr = acc.ctr_accessor_param
        if t.embedx_dim == 0:
            ctr.zero_init = False
        for name, value in CTR_ACCESSOR:
            setattr(ctr, name, value)
        _sgd_rule(acc.embed_sgd_param, t)
        _sgd_rule(acc.embedx_sgd_param, t)
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


class DescWriter:
    """The descriptors of one plan. Each table is printed once and its text reused: only the
    dense tables' dims depend on the role, and a split to many servers would otherwise print
    every sparse table once per server and twice per trainer. The text is what to_text prints
    for the whole PSParameter (format/psdesc.py's field_text is the same printer)."""

    def __init__(self, plan: PsPlan):
        self.plan = plan
        self.n_ps = len(plan.endpoints)
        self._texts: dict = {}
        self._service = _service_text()

    def _table(self, t: PsTable, role_id: int) -> str:
        key = (t.table_id, role_id if t.is_dense else None)
        text = self._texts.get(key)
        if text is None:
            msg = TableParameter()
            fill_table(msg, t, self.n_ps, role_id)
            text = self._texts[key] = field_text("downpour_table_param", msg, 4)
        return text

    def _tables(self, role_id: int) -> str:
        return "".join(self._table(t, role_id) for t in self.plan.tables)

    def worker_desc(self, trainer_id: int) -> str:
        """build_worker_desc() of trainer `trainer_id`."""
        tables = self._tables(trainer_id)
        return ("worker_param {\n  downpour_worker_param {\n" + tables + "  }\n}\n"
                "server_param {\n  downpour_server_param {\n" + tables + self._service
                + "  }\n}\n")

    def server_desc(self, endpoint: str) -> str:
        """build_server_desc() of the pserver at `endpoint`."""
        tables = self._tables(self.plan.server_index(endpoint))
        return ("server_param {\n  downpour_server_param {\n" + tables + self._service
                + "  }\n}\n")


def worker_desc(plan: PsPlan, trainer_id: int) -> str:
    """build_worker_desc() of trainer `trainer_id`."""
    return DescWriter(plan).worker_desc(trainer_id)


def server_desc(plan: PsPlan, endpoint: str) -> str:
    """build_server_desc() of the pserver at `endpoint`."""
    return DescWriter(plan).server_desc(endpoint)
