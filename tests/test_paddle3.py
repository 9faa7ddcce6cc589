"""Programs saved by Paddle 3.x with FLAGS_enable_pir_api=0 (tests/data/paddle3/README.md): the
old static IR, with the attrs and slots 3.x adds (use_onednn, onednn_data_type, adam's amsgrad
and Moment2Max ...). Each style splits them as it splits the same model saved by Paddle 2.6.2
(samples/ctr_sparse_adam): the same programs op for op, the same descriptors byte for byte; the
splits check clean and train like the original."""
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile import load

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "paddle3")
SAMPLE26 = os.path.join(os.path.dirname(HERE), "samples", "ctr_sparse_adam")

CONFIGS = {
    "classic": "style: classic\nmode: sync\n",
    "fleet": "style: fleet\nmode: sync\npaddle_faults: fix\n",
    "fleet-async": "style: fleet\nmode: async\n",
    "ps": "style: ps\nmode: sync\n",
    "ps-geo": "style: ps\nmode: geo\n",
}
COMMON = "pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\ntrainer_id: all\n"


def _cli(*args):
    r = CliRunner().invoke(cli_main, [str(a) for a in args])
    return r.exit_code, r.output


def _split(tmp_path, main, startup, name, cfg):
    cluster = tmp_path / (name + ".yaml")
    cluster.write_text(COMMON + CONFIGS[cfg])
    out = tmp_path / name
    code, text = _cli("split", main, "--startup", startup, "--cluster", cluster, "--out", out,
                      "--quiet")
    assert code == 0, text
    return cluster, out


def test_the_programs_carry_paddle_3s_attrs_and_slots():
    prog = load(os.path.join(DATA, "ctr_adam_main.pb"))
    ops = prog.global_block.ops
    adam = next(op for op in ops if op.type == "adam")
    assert adam.has_attr("amsgrad") and "Moment2Max" in adam.inputs
    assert any(op.has_attr("use_onednn") for op in ops)
    assert any(op.has_attr("onednn_data_type") for op in ops)
    old = load(os.path.join(SAMPLE26, "main.pb"))
    assert not any(op.has_attr("use_onednn") for op in old.global_block.ops)


@pytest.mark.parametrize("cfg", sorted(CONFIGS))
def test_a_paddle3_program_splits_as_the_same_model_saved_by_paddle_2_6(tmp_path, cfg):
    """Split the 3.x program and the 2.6.2 one with the same config: every written program has
    the same op types in the same blocks, and the descriptors (style ps) are byte-identical."""
    cluster, new = _split(tmp_path, os.path.join(DATA, "ctr_adam_main.pb"),
                          os.path.join(DATA, "ctr_adam_startup.pb"), "p3", cfg)
    _, old = _split(tmp_path, os.path.join(SAMPLE26, "main.pb"),
                    os.path.join(SAMPLE26, "startup.pb"), "p26", cfg)
    rel = sorted(os.path.relpath(os.path.join(d, f), new) for d, _, fs in os.walk(new)
                 for f in fs)
    assert rel == sorted(os.path.relpath(os.path.join(d, f), old) for d, _, fs in os.walk(old)
                         for f in fs)
    for r in rel:
        if r.endswith(".pb"):
            a, b = load(str(new / r)), load(str(old / r))
            assert [sorted(op.type for op in blk.ops) for blk in a.blocks] == \
                [sorted(op.type for op in blk.ops) for blk in b.blocks], r
        elif r.endswith("_desc.txt"):
            assert (new / r).read_bytes() == (old / r).read_bytes(), r
    code, text = _cli("check", os.path.join(DATA, "ctr_adam_main.pb"), "--startup",
                      os.path.join(DATA, "ctr_adam_startup.pb"), "--cluster", cluster, new)
    assert code == 0, text
    if cfg == "fleet-async":        # Paddle's fault, reproduced by default: named
        assert "fleet-orphan-sparse-grad-sum" in text
    else:
        assert "0 warning(s)" in text, text


def test_the_optimizers_new_attrs_reach_the_pservers(tmp_path):
    _, out = _split(tmp_path, os.path.join(DATA, "ctr_adam_main.pb"),
                    os.path.join(DATA, "ctr_adam_startup.pb"), "p3", "classic")
    ps = load(str(out / "pserver_127.0.0.1_6175" / "main.pb"))
    adams = [op for blk in ps.blocks for op in blk.ops if op.type == "adam"]
    assert adams and all(op.has_attr("amsgrad") for op in adams)


@pytest.mark.parametrize("opt, cfg", [("adam", "classic"), ("sgd", "classic"),
                                      ("adam", "fleet"), ("sgd", "fleet")])
def test_paddle3_splits_train_like_the_original(tmp_path, opt, cfg):
    main = os.path.join(DATA, "ctr_%s_main.pb" % opt)
    startup = os.path.join(DATA, "ctr_%s_startup.pb" % opt)
    cluster, out = _split(tmp_path, main, startup, "s", cfg)
    code, text = _cli("simulate", main, "--startup", startup, "--cluster", cluster, out,
                      "--steps", 3)
    assert code == 0, text
    assert "result: all 5 parameters equal" in text, text


def test_the_sgd_program_splits_in_style_ps(tmp_path):
    """SGD: the servers' rule is sgd, the sparse accessor's rule Adam's, as Paddle writes it."""
    _, out = _split(tmp_path, os.path.join(DATA, "ctr_sgd_main.pb"),
                    os.path.join(DATA, "ctr_sgd_startup.pb"), "ps", "ps")
    text = (out / "pserver_127.0.0.1_6174" / "server_desc.txt").read_text()
    assert text.count('name: "SparseAdamSGDRule"') == 2, text        # embed and embedx rules
    assert text.count('name: "sgd"') == 2, text                       # the sparse and dense tables
