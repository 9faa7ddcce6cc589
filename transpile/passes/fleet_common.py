"""Small builders shared by the fleet trainer and pserver passes."""
from __future__ import annotations

from ..program import Attr, Op, Program, Var, VarType

CONTROL_VAR_PREFIX = "__control_var@"


def make_op(type: str, inputs: dict, outputs: dict, attrs: dict) -> Op:
    """A new op; attrs values may be Attr objects or plain values (type inferred)."""
    return Op(type, {k: list(v) for k, v in inputs.items()},
              {k: list(v) for k, v in outputs.items()},
              {k: (v if isinstance(v, Attr) else Attr.infer(v)) for k, v in attrs.items()})


def role_attrs(role: int) -> dict:
    return {"op_role": Attr("INT", role), "op_role_var": Attr("STRINGS", [])}


class ControlVars:
    """Deterministic control-var names: Paddle draws `__control_var@<random float>`; a counter
    per program gives the same shape of name and byte-identical output across runs."""

    def __init__(self, program: Program):
        self._program = program
        self._n = 0

    def new(self) -> str:
        block = self._program.global_block
        while True:
            name = "%s%d" % (CONTROL_VAR_PREFIX, self._n)
            self._n += 1
            if name not in block.vars:
                break
        block.add_var(Var(name, VarType("LOD_TENSOR", {}), persistable=False))
        return name


def new_tensor(name: str, like: Var | None, shape, *, dtype: str | None = None,
               kind: str | None = None, persistable: bool = True,
               lod_level: int | None = None) -> Var:
    """A var as Paddle's block.create_var makes it: kind LOD_TENSOR unless given."""
    return Var.tensor(name, dtype or (like.dtype if like else "FP32"), shape,
                      kind=kind or "LOD_TENSOR", lod_level=lod_level, persistable=persistable)
