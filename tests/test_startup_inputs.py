"""A startup op that fills several parameters at once (PaddleRec's GRU weights go through a
`coalesce_tensor` in startup): Paddle's pserver startup pass looks each input of such an op up
among the pserver's vars and fails when one is sliced or held elsewhere. We refuse the same
programs, with the reason, and write nothing."""
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile import load, load_config, split
from transpile.core.errors import RefusedError
from transpile.passes.build import make_op, tensor_like

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def _with_coalesce(case, names):
    main = load(os.path.join(CORPUS, case, "main.pb"))
    startup = load(os.path.join(CORPUS, case, "startup.pb")).copy()
    first = startup.global_block.var(names[0])
    startup.global_block.add_var(tensor_like(first, "fused_0", [1], True))
    startup.global_block.ops.append(make_op(
        "coalesce_tensor", {"Input": list(names)},
        {"Output": list(names), "FusedOutput": ["fused_0"]}, {"op_role": 0}))
    return main, startup, load_config(os.path.join(CORPUS, case, "cluster.yaml"))


@pytest.mark.parametrize("case,names,missing", [
    ("classic/basic", ["fc_w", "fc_b"], "fc_w"),                # fc_w is sliced into blocks
    ("fleet/mlp_sgd_sync", ["fc_0.w_0", "fc_0.b_0"], None),     # held on different pservers
])
def test_a_startup_op_reading_vars_the_pserver_lacks_is_refused(case, names, missing):
    main, startup, cfg = _with_coalesce(case, names)
    with pytest.raises(RefusedError, match="coalesce_tensor.*does not hold") as e:
        split(main, startup, cfg)
    if missing:
        assert "KeyError: '%s'" % missing in str(e.value)


def test_the_refusal_writes_nothing(tmp_path):
    from transpile import save
    main, startup, _ = _with_coalesce("classic/basic", ["fc_w", "fc_b"])
    save(startup, str(tmp_path / "startup.pb"))
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, ["split", os.path.join(CORPUS, "classic/basic/main.pb"),
                                      "--startup", str(tmp_path / "startup.pb"), "--cluster",
                                      os.path.join(CORPUS, "classic/basic/cluster.yaml"),
                                      "--out", str(out)])
    assert r.exit_code == 2 and "does not hold" in r.output and r.output.count("\n") == 1
    assert not out.exists()


def test_inputs_the_pserver_holds_are_fine():
    """Reading a var held on the same pserver is what Paddle copies as is."""
    main, startup, cfg = _with_coalesce("fleet/mlp_sgd_sync", ["fc_0.b_0"])
    res = split(main, startup, cfg)
    assert any(op.type == "coalesce_tensor" for key, p in res.programs.items()
               if key.endswith("/startup") and key.startswith("pserver_")
               for op in p.global_block.ops)
