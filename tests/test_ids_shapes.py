"""Remote lookups by ids of every shape (tests/data/idshapes): Paddle refuses them (its fused
lookup and push take 2-D ids), so does `split` by default; under `paddle_faults: fix` the ids are
made 2-D (passes/idsfix.py: `[-1]`, `[-1, a, b]` for lookup_table_v2, `[-1, n, 1]` for the
lookup_table of static.nn.sparse_embedding), the rows come back in the program's shape, and every
style and mode trains like the original (the push keeps the batch as its ids' first dim, so its
gradient is scaled as the original's would be)."""
import os

import pytest
from click.testing import CliRunner

from cli import main as cli_main

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "idshapes")
KINDS = ("v2_1d", "v2_3d", "se_multihot", "se_mixed", "v2_mixed")
SETTINGS = [(s, m) for s in ("ps", "fleet", "classic") for m in ("sync", "async")]
IDS_2D = "The dimension of the 'Ids' tensor must be 2."


def _run(*args):
    return CliRunner().invoke(cli_main, [str(a) for a in args])


def _cfg(tmp_path, style, mode, fix):
    p = tmp_path / ("%s_%s_%s.yaml" % (style, mode, fix))
    p.write_text("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\ntrainer_id: all\n"
                 "mode: %s\nstyle: %s\npaddle_faults: %s\n" % (mode, style, fix))
    return str(p)


def _args(kind):
    m = os.path.join(DATA, kind)
    return [m + "/main.pb", "--startup", m + "/startup.pb"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("style", ["ps", "fleet", "classic"])
def test_refused_as_paddle_refuses_by_default(kind, style, tmp_path):
    out = tmp_path / "out"
    cfg = _cfg(tmp_path, style, "async", "reproduce")
    r = _run("split", *_args(kind), "--cluster", cfg, "--out", out)
    if style == "classic" and kind.startswith("se_"):
        # Paddle's DistributeTranspiler splits a distributed table by 3-D ids (made by Paddle
        # 2.6.2 itself: the same split), whose trainer's merge_ids gives [N, W] rows
        assert r.exit_code == 0, r.output
        r = _run("check", *_args(kind), "--cluster", cfg, out)
        assert r.exit_code == 1 and "classic-dist-table-ids-not-2d" in r.output, r.output
        return
    assert r.exit_code == 2 and IDS_2D in r.output and not out.exists(), r.output


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("style,mode", SETTINGS)
def test_fixed_trains_like_the_original(kind, style, mode, tmp_path):
    cfg, out = _cfg(tmp_path, style, mode, "fix"), tmp_path / "out"
    r = _run("split", *_args(kind), "--cluster", cfg, "--out", out, "-q")
    assert r.exit_code == 0, r.output
    r = _run("check", *_args(kind), "--cluster", cfg, out)
    assert r.exit_code == 0 and "Paddle fault" not in r.output, r.output
    if style == "ps" or kind in ("se_multihot", "v2_3d"):      # the rest: make test -m slow
        r = _run("simulate", *_args(kind), "--cluster", cfg, out, "--steps", "3",
                 "--expect-equal")
        assert r.exit_code == 0, r.output


def test_paddles_classic_split_of_a_3d_distributed_lookup_is_ours(tmp_path):
    from golden import split_and_compare
    case = os.path.join(HERE, "corpus", "ids", "classic_se_multihot_async")
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:20])

