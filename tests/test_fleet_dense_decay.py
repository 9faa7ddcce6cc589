"""fleet-decay-whole-param with a clip before the decay (the corpus's classic/l2decay program
split by Fleet: a dense parameter sliced over the pservers, clipped by value, then L2-decayed):
Fleet's pserver pass leaves the decay reading the whole parameter (which no pserver holds) and
writing the whole clip output (which the update does not read). Under `paddle_faults: fix` the
decay reads the pserver's block and writes the block of the gradient the update reads, here
the clip's output (fleet-clip-before-merge fixed too)."""
from __future__ import annotations

import os

from click.testing import CliRunner

from cli import main as cli_main

CASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "classic", "l2decay")


def _split_and_simulate(tmp_path, setting):
    cfg = tmp_path / ("%s.yaml" % setting)
    cfg.write_text("pservers: [127.0.0.1:6174, 127.0.0.1:6175]\ntrainers: 2\nstyle: fleet\n"
                   "paddle_faults: %s\n" % setting)
    out = str(tmp_path / setting)
    base = ["--startup", CASE + "/startup.pb", "--cluster", str(cfg)]
    r = CliRunner().invoke(cli_main, ["split", CASE + "/main.pb"] + base + ["--out", out])
    assert r.exit_code == 0, r.output
    s = CliRunner().invoke(cli_main, ["simulate", CASE + "/main.pb", out] + base
                           + ["--steps", "2", "--expect-equal"])
    return r.output, s


def test_reproduced_the_pserver_reads_the_whole_parameter(tmp_path):
    text, s = _split_and_simulate(tmp_path, "reproduce")
    assert "fleet-decay-whole-param" in text
    assert s.exit_code == 1
    assert "reads fc_w, which holds no value" in s.output


def test_fixed_the_decay_reads_the_block_and_trains_like_the_original(tmp_path):
    text, s = _split_and_simulate(tmp_path, "fix")
    assert "faults fixed: fleet-clip-before-merge, fleet-decay-whole-param" in text
    assert s.exit_code == 0, s.output
    assert "all 2 parameters equal" in s.output
