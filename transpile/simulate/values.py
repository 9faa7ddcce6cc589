"""Runtime values of the simulator: dtypes, SelectedRows, errors."""
from __future__ import annotations

import numpy as np

from ..errors import UserError

# Paddle's VarType.Type numbers (framework.proto) for the tensor dtypes.
DTYPE_CODES = {0: "BOOL", 1: "INT16", 2: "INT32", 3: "INT64", 4: "FP16", 5: "FP32", 6: "FP64",
               20: "UINT8", 21: "INT8", 22: "BF16"}
FLOAT_NAMES = ("FP16", "FP32", "FP64", "BF16")
INT_DTYPES = {"BOOL": np.bool_, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64,
              "UINT8": np.uint8, "INT8": np.int8}


class SimError(Exception):
    """The split (or the original) cannot be executed: a missing var, a shape mismatch... Exit 1."""


class NoKernelError(UserError):
    """An op the simulator has no kernel for. Exit 2."""


def np_dtype(name, float_dtype):
    """The numpy dtype for a Paddle dtype name or code; floats all become `float_dtype`."""
    if isinstance(name, int):
        name = DTYPE_CODES.get(name, "FP32")
    if name is None or name in FLOAT_NAMES:
        return float_dtype
    return INT_DTYPES.get(name, float_dtype)


class SelectedRows:
    """A sparse gradient: `value[i]` is row `rows[i]` of a [height, ...] tensor (rows may repeat)."""

    def __init__(self, rows, value, height):
        self.rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        self.value = np.asarray(value)
        self.height = int(height)
        if self.value.shape[0] != self.rows.shape[0]:
            raise SimError("SelectedRows with %d rows but a value of %d rows"
                           % (self.rows.shape[0], self.value.shape[0]))

    @property
    def shape(self):
        return (self.height,) + tuple(self.value.shape[1:])

    def to_dense(self):
        out = np.zeros(self.shape, dtype=self.value.dtype)
        np.add.at(out, self.rows, self.value)
        return out

    def merged(self) -> "SelectedRows":
        """Duplicate rows added up, rows sorted (Paddle's MergeAdd)."""
        uniq, inv = np.unique(self.rows, return_inverse=True)
        val = np.zeros((len(uniq),) + tuple(self.value.shape[1:]), dtype=self.value.dtype)
        np.add.at(val, inv, self.value)
        return SelectedRows(uniq, val, self.height)

    def scaled(self, s, b=0.0) -> "SelectedRows":
        return SelectedRows(self.rows, self.value * s + b, self.height)

    def __repr__(self):
        return "SelectedRows(height=%d, rows=%d)" % (self.height, len(self.rows))


def dense(v):
    return v.to_dense() if isinstance(v, SelectedRows) else v


def shape_of(v):
    if isinstance(v, SelectedRows):
        return v.shape
    return tuple(np.shape(v))
