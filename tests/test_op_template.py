"""passes/build.py's OpTemplate: the ops it makes equal make_op's, each op's attrs its own to
edit, the Attrs of scalar values shared between them (a split to many pservers makes a sum and
a scale per grad block: tens of thousands of ops from two templates)."""
from transpile.ir import roles
from transpile.passes.build import OpTemplate, make_op, role_attrs
from transpile.ir.program import Attr
from transpile.format.protowrite import op_bytes

ATTRS = {"scale": 0.5, "bias_after_scale": True, **role_attrs(roles.FORWARD),
         "use_mkldnn": Attr("BOOLEAN", False)}


def _two():
    t = OpTemplate("scale", ATTRS)
    return (t.make({"X": ["a"]}, {"Out": ["b"]}), t.make({"X": ["c"]}, {"Out": ["d"]}))


def test_a_template_op_is_make_ops():
    a, _ = _two()
    want = make_op("scale", {"X": ["a"]}, {"Out": ["b"]}, ATTRS)
    assert a == want
    assert list(a.attrs) == list(want.attrs)
    assert op_bytes(a) == op_bytes(want)


def test_scalar_attrs_are_shared_lists_are_not():
    a, b = _two()
    assert a.attrs["scale"] is b.attrs["scale"]
    assert a.attrs[roles.ROLE_ATTR] is b.attrs[roles.ROLE_ATTR]
    assert a.attrs[roles.ROLE_VAR_ATTR] is not b.attrs[roles.ROLE_VAR_ATTR]
    assert a.attrs[roles.ROLE_VAR_ATTR].value is not b.attrs[roles.ROLE_VAR_ATTR].value
    assert a.attrs is not b.attrs


def test_editing_one_op_leaves_the_others():
    a, b = _two()
    a.set_attr("scale", 0.25)
    a.attr(roles.ROLE_VAR_ATTR).append("x")
    a.set_attr("new", 3)
    assert b.attr("scale") == 0.5 and b.attr(roles.ROLE_VAR_ATTR) == [] and not b.has_attr("new")
    c = OpTemplate("scale", ATTRS).make({"X": ["e"]}, {"Out": ["f"]})
    assert c.attr("scale") == 0.5 and c.attr(roles.ROLE_VAR_ATTR) == []


def test_shared_attrs_bytes_follow_each_ops_own_attrs():
    """The writer keeps the bytes of attrs made of shared Attrs (a template's ops without a
    list attr: the sum and scale of every grad block) by the identity of those Attrs: an op
    whose attrs were set, reordered or added to since is written as it now is, and each
    is the bytes make_op's op of the same attrs gets."""
    from transpile.format import protowrite
    scalars = {"scale": 0.5, "bias_after_scale": True, roles.ROLE_ATTR: Attr("INT", 0)}
    t = OpTemplate("scale", scalars)
    ops = [t.make({"X": ["a%d" % i]}, {"Out": ["b%d" % i]}) for i in range(3)]
    want = op_bytes(make_op("scale", {"X": ["a0"]}, {"Out": ["b0"]}, scalars))
    assert op_bytes(ops[0]) == want
    assert any(hit[1][0] is ops[0].attrs["scale"]
               for hit in protowrite._SHARED_ATTRS.values())   # (kept by identity)
    ops[1].set_attr("scale", 0.25)
    assert op_bytes(ops[1]) == op_bytes(make_op("scale", {"X": ["a1"]}, {"Out": ["b1"]},
                                                dict(scalars, scale=0.25)))
    ops[2].attrs = dict(reversed(list(ops[2].attrs.items())))     # the same Attrs, reordered
    assert op_bytes(ops[2]) == op_bytes(make_op("scale", {"X": ["a2"]}, {"Out": ["b2"]},
                                                dict(reversed(list(scalars.items())))))
    assert op_bytes(ops[2]) != op_bytes(t.make({"X": ["a2"]}, {"Out": ["b2"]}))
    assert op_bytes(t.make({"X": ["a0"]}, {"Out": ["b0"]})) == want


def test_make_op_types_a_list_of_names_as_attr_infer_does():
    """make_op's short way for a list of names (a send's epmap, send_varnames, op_role_var)
    gives what Attr.infer gives; a typed attr (_TYPED, op_role) keeps its declared type."""
    ops = make_op("send", {"X": ["a"]}, {"Out": ["b"]},
                  {"epmap": ["h:1", "h:2"], "names": ("x",), "sections": [],
                   roles.ROLE_ATTR: roles.RPC})
    assert ops.attrs["epmap"] == Attr.infer(["h:1", "h:2"]) == Attr("STRINGS", ["h:1", "h:2"])
    assert ops.attrs["names"] == Attr.infer(("x",))
    assert ops.attrs["sections"] == Attr("LONGS", [])
    assert ops.attrs[roles.ROLE_ATTR] == Attr("INT", roles.RPC)
    given = ["u", "v"]
    op = make_op("t", {}, {}, {"names": given})
    assert op.attrs["names"].value == given and op.attrs["names"].value is not given
