"""Style ps (Paddle 2.1+'s parameter-server pipeline) against Paddle 2.6.2's own output:
tests/corpus/ps (the team's reference cases), tests/corpus/ps-gen (more cases made the same
way with the generator of notes/ps/gen) and tests/corpus/paddlerec-ps (real PaddleRec models),
programs compared structurally and the descriptors byte for byte; refusals exit 2 with
Paddle's reason and write nothing; the output is the same bytes whatever PYTHONHASHSEED; what
is written loads back; Paddle's splits check clean, but where a pserver of Paddle's cannot start
(a finding naming the Paddle fault)."""
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import (CORPUS, assert_refused_like_paddle, case_dirs, is_refused, load_case,
                    split_and_compare, split_args, tree_files)
from transpile import split
from transpile.format import programio
from transpile.format.programio import to_bytes
from transpile.format.psdesc import parse_text, to_text

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CASES = case_dirs("ps") + case_dirs("ps-gen") + case_dirs("paddlerec-ps")


def _id(case):
    return "%s/%s" % (os.path.basename(os.path.dirname(case)), os.path.basename(case))


def _check_args(case, split_dir):
    return ["check", os.path.join(case, "main.pb"), "--startup",
            os.path.join(case, "startup.pb"), "--cluster", os.path.join(case, "cluster.yaml"),
            split_dir]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if is_refused(c)], ids=_id)
def test_refusal_says_paddles_reason_in_one_line_and_writes_nothing(case, tmp_path):
    assert_refused_like_paddle(case, str(tmp_path / "out"), reason=True)


# Paddle's split whose pservers fail at their start: case -> the Paddle fault check names
CANNOT_START = {"ps-gen/inits_adam_sync": "ps-dense-empty-initializer"}


@pytest.mark.parametrize("case", [c for c in CASES if not is_refused(c)], ids=_id)
def test_paddles_split_checks_clean(case):
    r = CliRunner().invoke(cli_main, _check_args(case, os.path.join(case, "expected")))
    fault = CANNOT_START.get(_id(case))
    if fault is None:
        assert r.exit_code == 0, r.output
    else:
        assert r.exit_code == 1 and "Paddle fault %s" % fault in r.output, r.output


def test_the_families_are_there():
    assert len(case_dirs("ps")) >= 29 and len(case_dirs("ps-gen")) >= 25
    assert sum(map(is_refused, case_dirs("ps"))) == 4 and len(case_dirs("paddlerec-ps")) == 4


@pytest.mark.parametrize("name", ["two_tables_sgd_sync", "rec_fm_async", "ctr_adam_geo"])
def test_output_is_byte_identical_whatever_the_hash_seed(name, tmp_path):
    case = os.path.join(CORPUS, "ps", name)
    trees = []
    for seed in ("0", "4242"):
        out = str(tmp_path / ("out" + seed))
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, os.path.join(ROOT, "cli.py"), "-q"]
                       + split_args(case, out) + ["--trainer-id", "all"],
                       check=True, env=env, cwd=ROOT)
        trees.append(tree_files(out))
    assert "trainer_1/worker_desc.txt" in trees[0] and "report.md" in trees[0]
    assert trees[0] == trees[1]


def test_what_is_written_loads_back(tmp_path):
    case = os.path.join(CORPUS, "ps", "dist_table_sgd_sync")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli_main, ["-q"] + split_args(case, str(out)))
    assert r.exit_code == 0, r.output
    files = tree_files(str(out))
    progs = [k for k in files if k.endswith(".pb")]
    descs = [k for k in files if k.endswith("_desc.txt")]
    assert len(progs) == 8 and len(descs) == 4
    for k in progs:
        assert to_bytes(programio.load(str(out / k))) == files[k]
    for k in descs:
        text = files[k].decode("utf-8")
        assert to_text(parse_text(text)) == text
    plan = json.loads(files["plan.json"])
    assert plan["style"] == "ps" and [t["kind"] for t in plan["tables"]] == \
        ["sparse", "dense", "barrier"]


def test_split_leaves_its_inputs_alone_and_repeats_exactly():
    m, s, c = load_case("ps", "rec_fm_sync")
    before = (to_bytes(m), to_bytes(s))
    first = split(m, s, c, trainer_ids=[0, 1])
    second = split(m, s, c, trainer_ids=[0, 1])
    assert (to_bytes(m), to_bytes(s)) == before
    assert {k: to_bytes(p) for k, p in first.programs.items()} == \
        {k: to_bytes(p) for k, p in second.programs.items()}
    assert first.texts == second.texts and len(first.texts) == 4


def test_our_split_checks_clean_and_diffs_equal_to_paddles(tmp_path):
    case = os.path.join(CORPUS, "ps", "rec_xdeepfm_sync")
    out = str(tmp_path / "out")
    assert CliRunner().invoke(cli_main, ["-q"] + split_args(case, out)).exit_code == 0
    r = CliRunner().invoke(cli_main, _check_args(case, out))
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli_main, ["diff", out, os.path.join(case, "expected")])
    assert r.exit_code == 0, r.output
