"""The command line: show, convert, config check, and what bad input does (exit 2, one line)."""
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SAMPLE = os.path.join(ROOT, "samples", "mlp_sgd", "main.pb")


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env)


def test_show_lists_vars_ops_and_summary():
    r = run("show", SAMPLE)
    assert r.exit_code == 0, r.output
    assert "block 0: 27 vars, 21 ops" in r.output
    assert ("sgd(Grad=fc_0.w_0@GRAD, LearningRate=learning_rate_0, Param=fc_0.w_0) -> "
            "(ParamOut=fc_0.w_0)  op_role=optimize") in r.output
    assert "fc_0.w_0: LOD_TENSOR FP32[1000, 1000]  persistable parameter" in r.output
    assert "summary: 1 blocks, 21 ops, 27 vars, 4 parameters (3.8 MiB)" in r.output
    assert "\x1b[" not in r.output        # plain text when not a terminal


def test_show_color_forced_and_no_color_env():
    r = run("--color", "show", SAMPLE)
    assert "\x1b[" in r.output
    r = run("show", SAMPLE, env={"NO_COLOR": "1"})
    assert "\x1b[" not in r.output


def test_show_block_and_json():
    r = run("show", os.path.join(HERE, "corpus", "classic", "lr_decay_conditional", "main.pb"),
            "--block", "1")
    assert r.exit_code == 0
    assert r.output.startswith("block 1 (parent 0)")
    assert "block 0:" not in r.output
    r = run("show", SAMPLE, "--format", "json")
    assert r.exit_code == 0 and '"format": "pstranspile.program/1"' in r.output
    r = run("show", SAMPLE, "--block", "9")
    assert r.exit_code == 2 and "the program has blocks 0..0" in r.output


def test_convert_both_ways_is_lossless(tmp_path):
    j, b = str(tmp_path / "a.json"), str(tmp_path / "b.pb")
    assert run("convert", SAMPLE, j).exit_code == 0
    assert run("convert", j, b).exit_code == 0
    assert open(b, "rb").read() == open(SAMPLE, "rb").read()


def test_convert_refuses_unknown_extension(tmp_path):
    r = run("convert", SAMPLE, str(tmp_path / "a.txt"))
    assert r.exit_code == 2 and "unknown program format" in r.output
    assert not (tmp_path / "a.txt").exists()


def test_config_check_prints_resolved_config(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("pservers: [127.0.0.1:6174]\ntrainers: 2\n")
    r = run("config", "check", str(p))
    assert r.exit_code == 0
    assert "mode: sync" in r.output and "min_block_size: 8192" in r.output


@pytest.mark.parametrize("content, needle", [
    (b"", "empty file"),
    (b"hello, this is not a program", "not a valid ProgramDesc"),
    (None, "truncated"),
])
def test_bad_program_files_one_line_exit_2(tmp_path, content, needle):
    p = tmp_path / "bad.pb"
    p.write_bytes(content if content is not None else open(SAMPLE, "rb").read()[:777])
    r = run("show", str(p))
    assert r.exit_code == 2
    assert needle in r.output and str(p) in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output


def test_bad_json_program_names_the_field(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"blocks": [{"idx": 0, "parent_idx": -1, "ops": [{"inputs": {}}]}]}')
    r = run("show", str(p))
    assert r.exit_code == 2
    assert "program.blocks[0].ops[0]: missing field 'type'" in r.output
    p.write_text('{"blocks": [{"idx": "zero", "parent_idx": -1}]}')
    r = run("show", str(p))
    assert r.exit_code == 2 and "blocks[0].idx: expected an integer" in r.output


def test_block_attr_pointing_nowhere_is_refused(tmp_path):
    from transpile.format import programio
    prog = programio.load(os.path.join(HERE, "corpus", "classic", "lr_decay_conditional",
                                       "main.pb"))
    op = next(op for _, _, op in prog.ops() if op.type == "conditional_block")
    op.attrs["sub_block"].value = 99
    p = str(tmp_path / "x.pb")
    programio.save(prog, p)
    r = run("show", p)
    assert r.exit_code == 2 and "points at block 99, which does not exist" in r.output


def test_missing_file_exit_2():
    r = run("show", "/nonexistent/x.pb")
    assert r.exit_code == 2 and "no such file" in r.output


def test_real_process_exit_codes_and_streams(tmp_path):
    # cli.run is the console script: collector off, os._exit at the end (streams flushed first)
    exe = [sys.executable, "-c", "import cli; cli.run()"]
    ok = subprocess.run(exe + ["show", SAMPLE], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0 and ok.stdout and not ok.stderr
    # everything printed made it out before the process ended
    assert ok.stdout == run("show", SAMPLE).output
    bad = subprocess.run(exe + ["show", str(tmp_path / "none.pb")], capture_output=True,
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and not bad.stdout
    assert bad.stderr.startswith("pstranspile: error: ") and "Traceback" not in bad.stderr


def test_help_teaches():
    r = run("--help")
    assert "Exit codes" in r.output and "split" in r.output
    r = run("split", "--help")
    assert "trainer_<id>/main.pb" in r.output and "--force" in r.output
