"""What report.md's diff of a split's trainer holds (diff_programs_and_names without details):
a trainer main at 5k ops and 64 pservers adds ~41k vars and thousands of ops, and its diff is
made at the peak of the process that builds it (issue 47)."""
import os

from transpile.diff import programs as diff_mod
from transpile.diff.result import VarNames
from transpile.format import programio

HERE = os.path.dirname(os.path.abspath(__file__))
PSERVER = os.path.join(HERE, "corpus", "classic", "basic", "expected", "pserver_127.0.0.1_6174",
                       "main.pb")


def test_var_changes_without_details_are_names():
    """report.md's diff of a split's trainer main: the added and removed vars by name only (a
    VarNames: ~41k added at 5k ops and 64 pservers, no object each), the changed ones as
    VarChanges with their changes; with details, a VarChange per var (issue 47)."""
    a = programio.load(PSERVER)
    b = a.copy()
    g = b.global_block
    del g.vars["fc_b@GRAD.trainer_1"]
    g.vars["extra2"] = g.vars["fc_b"].with_shape((4,), name="extra2")
    g.vars["extra"] = g.vars["fc_b"].with_shape((3,), name="extra")
    g.vars["fc_b"] = g.vars["fc_b"].with_shape((5,))
    brief = diff_mod.diff_programs_and_names(a, b, details=False)[0].blocks[0].vars
    assert isinstance(brief, VarNames) and brief
    assert brief.added == ["extra", "extra2"] and brief.removed == ["fc_b@GRAD.trainer_1"]
    assert [(v.kind, v.name) for v in brief.changed] == [("changed", "fc_b")]
    full = diff_mod.diff_programs_and_names(a, b)[0].blocks[0].vars
    assert [(v.kind, v.name) for v in full] == [
        ("added", "extra"), ("added", "extra2"), ("changed", "fc_b"),
        ("removed", "fc_b@GRAD.trainer_1")]
    assert all(not hasattr(v, "__dict__") and isinstance(v.details, list) and v.details
               for v in full)
    assert full[2].details == brief.changed[0].details
    assert not diff_mod.diff_programs_and_names(a, a, details=False)[0].blocks[0].vars


def test_op_keys_let_go_before_the_vars_are_compared(monkeypatch):
    """The interned op keys (a tuple per distinct op: ~6 MiB for a split's trainer main at
    5k ops) are not held while the vars are compared (issue 47)."""
    a = programio.load(PSERVER)
    b = a.copy()
    del b.global_block.vars["fc_b@GRAD.trainer_1"]
    held = []
    compare_vars = diff_mod._diff_vars

    def spy(sa, sb, ba, bb, details=True):
        held.append(len(sa.keys))
        return compare_vars(sa, sb, ba, bb, details)
    monkeypatch.setattr(diff_mod, "_diff_vars", spy)
    d = diff_mod.diff_programs_and_names(a, b, details=False)[0]
    assert d.blocks[0].vars.removed == ["fc_b@GRAD.trainer_1"]
    assert len(a.blocks) > 1 and held == [0] * len(a.blocks)
