"""A pserver's tables built from its `server_desc.txt`, the `BarrierTable`, and where the
client sends keys and dense slices (`ps/table/table.cc`, `barrier_table.cc`,
`common_table.h`, `ps/service/brpc_ps_client.cc`, `ps_client.h`).
"""
from __future__ import annotations

import numpy as np

from ....core.errors import UserError
from ....format import psdesc
from . import TableError, TableOptions
from .dense import MemoryDenseTable
from .geo import MemorySparseGeoTable
from .sparse import MemorySparseTable, as_keys


class BarrierTable:
    """Waits for `trainer_num` trainers (types "0" and "1" register one, "2" lowers the count
    it waits for), then pours every table of its pserver."""
    table_class = "BarrierTable"

    def __init__(self, param, options: TableOptions = TableOptions(), where: str = "table"):
        self.table_id = int(param.table_id)
        self.trigger = int(param.common.trainer_num)
        self.arrived: set = set()
        self.server = None

    def barrier(self, trainer_id: int, barrier_type: str = "0") -> bool:
        """One trainer at the barrier; True when it was the last and the tables were poured
        (a Paddle trainer that is not the last blocks until then)."""
        if str(barrier_type) == "2":
            self.trigger -= 1
        else:
            self.arrived.add(int(trainer_id))
        if len(self.arrived) < self.trigger:
            return False
        if self.server is not None:
            for table in self.server.tables.values():
                table.pour()
        self.arrived = set()
        return True

    def pour(self):
        """Pour: nothing for the barrier itself."""


TABLE_CLASSES = {cls.table_class: cls for cls in (MemorySparseTable, MemoryDenseTable,
                                                  MemorySparseGeoTable, BarrierTable)}
# SSDSparseTable keeps cold rows on disk (ssd_sparse_table.cc): the values and the rules applied
# to them are MemorySparseTable's
TABLE_CLASSES["SSDSparseTable"] = MemorySparseTable


class PsServer:
    """The tables of pserver `index` of `server_num`, by table id."""

    def __init__(self, desc, index: int = 0, server_num: int = 1,
                 options: TableOptions = TableOptions(), source: str = "server_desc.txt"):
        self.index, self.server_num, self.options = int(index), int(server_num), options
        params = desc.server_param.downpour_server_param.downpour_table_param
        if not len(params):
            raise UserError("%s: server_param has no downpour_table_param" % source)
        self.tables: dict = {}
        self.desc_params: dict = {}     # table id -> its TableParameter
        for i, param in enumerate(params):
            where = "%s: downpour_table_param[%d] (table_id %d)" % (source, i, param.table_id)
            if param.table_id in self.tables:
                raise UserError("%s: table_id %d appears twice" % (where, param.table_id))
            cls = TABLE_CLASSES.get(param.table_class)
            if cls is None:
                raise UserError("%s: table_class %r is not simulated (one of %s)"
                                % (where, param.table_class, ", ".join(sorted(TABLE_CLASSES))))
            if cls is MemoryDenseTable:
                table = cls(param, options, where, shard=self.index)
            else:
                table = cls(param, options, where)
            if cls is BarrierTable:
                table.server = self
            self.tables[int(param.table_id)] = table
            self.desc_params[int(param.table_id)] = param

    def table(self, table_id: int):
        table = self.tables.get(int(table_id))
        if table is None:
            raise TableError("pserver %d has no table %d (it has %s)"
                             % (self.index, table_id, sorted(self.tables)))
        return table

    def barrier(self, trainer_id: int, barrier_type: str = "0") -> bool:
        """The barrier of this pserver's BarrierTable (the first, by id)."""
        for tid in sorted(self.tables):
            if isinstance(self.tables[tid], BarrierTable):
                return self.tables[tid].barrier(trainer_id, barrier_type)
        raise TableError("pserver %d has no BarrierTable" % self.index)


def build_server(text: str, index: int = 0, server_num: int = 1,
                 options: TableOptions = TableOptions(), source: str = "server_desc.txt"):
    """A PsServer from the text of a server_desc.txt."""
    return PsServer(psdesc.parse_text(text, source), index, server_num, options, source)


# --- the client's routing ---------------------------------------------------------------------
def local_shard_num(shard_num: int, server_num: int) -> int:
    """sparse_local_shard_num: the shards of a sparse table each pserver holds."""
    if shard_num % server_num == 0:
        return shard_num // server_num
    return shard_num // server_num + 1


def sparse_server(keys, shard_num: int, server_num: int):
    """The pserver of each key of a MemorySparseTable: (key % shard_num) / local_shard_num."""
    keys = as_keys(keys)
    local = np.uint64(local_shard_num(shard_num, server_num))
    return ((keys % np.uint64(shard_num)) // local).astype(np.int64)


def geo_server(keys, server_num: int):
    """The pserver of each key of a geo table: key % server_num."""
    return (as_keys(keys) % np.uint64(server_num)).astype(np.int64)


def dense_per(total: int, server_num: int) -> int:
    """The values of a dense table of `total` values each pserver's slice holds: total / n + 1
    (the last slice fewer: DenseDimPerShard)."""
    return total // server_num + 1


def dense_dims(total: int, server_num: int):
    """Each pserver's slice length of a dense table of `total` values: total / n + 1 each,
    the last the remainder (the descriptors' dims)."""
    per = dense_per(total, server_num)
    return [max(0, min(per, total - per * i)) for i in range(server_num)]


def split_dense(values, server_num: int):
    """The floats a dense push sends each pserver: slices of total / n + 1, the last padded
    with zeros (DenseDimPerShard)."""
    values = np.asarray(values).reshape(-1)
    per = dense_per(len(values), server_num)
    padded = np.zeros(per * server_num, dtype=np.float32)
    padded[:len(values)] = values       # rounded to float32 as it is copied
    # views of this array of our own (a table copies or only reads what it is pushed): a
    # dense table of 70M floats is not copied twice more
    return [padded[i * per:(i + 1) * per] for i in range(server_num)]
