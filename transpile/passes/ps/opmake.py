"""New ops as Paddle's ps passes append them: the given attrs, then the common attrs every op
Paddle 2.6 creates carries (op_role, op_role_var, op_namescope, op_device,
with_quant_attr)."""
from __future__ import annotations

from ...ir.program import Attr, Op


def ps_op(type_: str, inputs: dict, outputs: dict, attrs: dict, role: int = 0) -> Op:
    """An op with these slots (copied) and attrs (Attr values, kept as given)."""
    all_attrs = dict(attrs)
    all_attrs.setdefault("op_role", Attr("INT", role))
    all_attrs.setdefault("op_role_var", Attr("STRINGS", []))
    all_attrs.setdefault("op_namescope", Attr("STRING", "/"))
    all_attrs.setdefault("op_device", Attr("STRING", ""))
    all_attrs.setdefault("with_quant_attr", Attr("BOOLEAN", False))
    return Op(type_, {k: list(v) for k, v in inputs.items()},
              {k: list(v) for k, v in outputs.items()}, all_attrs)
