"""report.md: a person can see from it what went where."""
import os

from hypothesis import given, strategies as st

from transpile import load_config, split
from transpile.format import programio
from transpile.render.report import removed_kind, render_report

HERE = os.path.dirname(os.path.abspath(__file__))


def make(case):
    d = os.path.join(HERE, "corpus", case)
    main = programio.load(os.path.join(d, "main.pb"))
    startup = programio.load(os.path.join(d, "startup.pb"))
    cfg = load_config(os.path.join(d, "cluster.yaml"))
    r = split(main, startup, cfg)
    return main, r, cfg, render_report(main, r.programs, r.plan, case, cfg)


def test_classic_report_shows_removed_inserted_and_placement():
    main, r, cfg, text = make("classic/lr_decay_conditional")
    assert "Style **classic**, mode **sync**, 2 trainer(s), 2 pserver(s)" in text
    # removed ops grouped by why
    assert "- optimizer (2): sgd x2 — parameters: fc_b, fc_w" in text
    assert "- LR decay (13):" in text and "conditional_block x3" in text
    # inserted ops in place, with their endpoints, among context lines
    assert "+   13  send(X=[fc_w@GRAD.block0.trainer_0, fc_w@GRAD.block1.trainer_0])" in text
    assert "epmap=['127.0.0.1:6175', '127.0.0.1:6174']" in text
    assert "    11  mul_grad(" in text          # a context line, unmarked
    # placement table agrees with the plan
    assert "| fc_w | fc_w.block0 | [500, 1000] | 1.9 MiB | 127.0.0.1:6175 |" in text
    assert "Imbalance (max / mean bytes): 1.00" in text
    # pservers block by block
    assert "| 1 | LR decay (runs once per step) |" in text
    assert "| 6 | sgd of fc_w.block1 | sum → scale → sgd |" in text
    assert "| fc_w.block1 | uniform_random | [500, 1000] |" in text
    # real control-var names, not the diff's normalised ones
    assert "__control_var@send(" not in text


def test_fleet_report_describes_each_pserver():
    main, r, cfg, text = make("fleet/mlp_adam_sync")
    for ep in cfg.pservers:
        assert "## pserver_%s/main.pb" % ep.replace(":", "_") in text
        assert "`listen_and_serv` on %s, Fanin 2" % ep in text
    assert "- optimizer (4): adam x4" in text
    assert "adam of fc_0.w_0" in text


def test_removed_kind():
    from transpile.ir.program import Attr, Op
    assert removed_kind(Op("sgd", {"Param": ["w"]}, {}, {"op_role": Attr("INT", 2)})) == \
        "optimizer"
    assert removed_kind(Op("scale", {}, {}, {"op_role": Attr("INT", 2)})) == \
        "regularization / clip"
    assert removed_kind(Op("increment", {}, {}, {"op_role": Attr("INT", 16)})) == "LR decay"


def _cli(*args):
    from click.testing import CliRunner

    from cli import main
    return CliRunner().invoke(main, list(args))


def _case(name):
    d = os.path.join(HERE, "corpus", name)
    return [os.path.join(d, "main.pb"), "--startup", os.path.join(d, "startup.pb"),
            "--cluster", os.path.join(d, "cluster.yaml")], d


def test_split_writes_report_and_report_prints_it(tmp_path):
    args, _ = _case("classic/basic")
    out = str(tmp_path / "s")
    assert _cli("split", *args, "--out", out, "--quiet").exit_code == 0
    text = open(os.path.join(out, "report.md"), encoding="utf-8").read()
    assert text.startswith("# Split report: ")
    r = _cli("report", out)
    assert r.exit_code == 0 and r.output == text
    r = _cli("report", str(tmp_path))
    assert r.exit_code == 2 and "no report.md" in r.output


def test_split_expect_golden(tmp_path):
    args, d = _case("classic/basic")
    r = _cli("split", *args, "--out", str(tmp_path / "a"), "--quiet",
             "--expect", os.path.join(d, "expected"))
    assert r.exit_code == 0, r.output
    other = os.path.join(HERE, "corpus", "classic", "no_slice_var", "expected")
    r = _cli("split", *args, "--out", str(tmp_path / "b"), "--quiet", "--expect", other)
    assert r.exit_code == 1
    assert "difference(s) from the golden split" in r.output
    assert os.path.isfile(str(tmp_path / "b" / "plan.json"))    # the split itself is written


def test_op_lines_read_attrs_without_decoding_them_all():
    """format_op (the report's and `show`'s op lines) gives the same line before and after an
    op's attrs are decoded, and decodes none of them itself."""
    from transpile.render.show import format_op
    prog = programio.load(os.path.join(HERE, "corpus", "classic", "lr_decay_conditional",
                                       "main.pb"))
    ops = [op for _, _, op in prog.ops()]
    lines = [(format_op(op), format_op(op, attrs=True)) for op in ops]
    names = [op.attr_names() for op in ops]
    blocks = [op.block_attr_names() for op in ops]
    assert any(blocks) and not any(op.attrs_decoded for op in ops)
    for op in ops:
        op.attrs
    assert [(format_op(op), format_op(op, attrs=True)) for op in ops] == lines
    assert [list(op.attrs) for op in ops] == names
    assert [[n for n, a in op.attrs.items() if a.type in ("BLOCK", "BLOCKS")]
            for op in ops] == blocks


@given(st.lists(st.sampled_from(["", " ", "a", "b ", "\n", " \n ", "x\ny", "\t"]), max_size=8))
def test_report_pieces_join_to_the_stripped_text(lines):
    """report.md is written in pieces: they must join to "\\n".join(lines).rstrip() + "\\n"
    whatever whitespace the sections end with."""
    from transpile.render.report import _stripped_lines
    assert "".join(_stripped_lines(iter(lines))) == "\n".join(lines).rstrip() + "\n"


def test_the_ps_report_head_is_made_from_the_early_plan_entries():
    """Style ps: report.md's head is decided by plan.json's early entries (made while the
    programs are built); its programs' op counts change nothing in it. Classic and fleet
    heads read the grads' blocks (late): none is made early."""
    from transpile.core.config import load_config
    from transpile.format.programio import load
    from transpile.render.report import early_report_head, report_head
    from transpile.split import split
    from transpile.styles.registry import style_of
    for case, early_made in (("ps/ctr_adam_sync", True), ("clip/ps_ctr1_emb_clipvalue_sync",
                                                           True),
                             ("classic/lr_decay", False), ("fleet/ctr_sparse_adam_sync", False)):
        d = os.path.join(HERE, "corpus", case)
        main, startup = load(os.path.join(d, "main.pb")), load(os.path.join(d, "startup.pb"))
        config = load_config(os.path.join(d, "cluster.yaml"))
        style, ids = style_of(config), config.trainer_ids()
        parts = style.plan_parts(style.prepare(main, startup, config, ids), ids)
        whole = split(main, startup, config).plan
        head = early_report_head(parts.early, parts.LATE, "t", config)
        assert (head is not None) == early_made, case
        if head is not None:
            assert head == report_head(whole, "t", config)
            odd = dict(whole, programs={"trainer_0/main": {"blocks": 9, "ops": 9,
                                                           "removed": 9, "inserted": 9}})
            assert report_head(odd, "t", config) == head
            assert len(head) > 20
