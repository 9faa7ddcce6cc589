"""`pstranspile run` where no Paddle is needed: what it refuses, how it says Paddle is missing,
the launcher's environment read for one role, the verdict, and that split / check / simulate
never import Paddle (a poisoned `paddle` first on the path)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from transpile.commands.root import main as cli
from transpile.core.config import load_config
from transpile.core.errors import UserError
from transpile.runtime.cluster import RoleOptions, which_role
from transpile.runtime.local import LocalRun
from transpile.runtime.predict import Prediction
from transpile.runtime.verdict import compare, render_junit, to_json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "tests", "corpus")


def _split(tmp_path, case, name="split"):
    c = os.path.join(CORPUS, case)
    out = str(tmp_path / name)
    r = CliRunner().invoke(cli, ["-q", "split", os.path.join(c, "main.pb"), "--startup",
                                 os.path.join(c, "startup.pb"), "--cluster",
                                 os.path.join(c, "cluster.yaml"), "--out", out])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("case, versions", [("classic/basic", "Paddle 1.x and 2.0"),
                                            ("fleet/ctr_sparse_adam_async", "Paddle 2.0")])
def test_classic_and_fleet_splits_are_refused_naming_the_paddle_that_runs_them(
        tmp_path, case, versions):
    split = _split(tmp_path, case)
    r = CliRunner().invoke(cli, ["run", split, "--local", "--paddle-python", sys.executable])
    assert r.exit_code == 2
    line, = [x for x in r.output.splitlines() if x]
    assert "runs on %s" % versions in line and "style-ps splits" in line


def test_no_paddle_says_how_to_get_it_in_one_line(tmp_path):
    split = _split(tmp_path, "ps/two_tables_sgd_sync")
    poison = tmp_path / "poison"
    (poison / "paddle").mkdir(parents=True)
    (poison / "paddle" / "__init__.py").write_text("raise ImportError('no paddle here')\n")
    env = dict(os.environ, PYTHONPATH=str(poison), PSTRANSPILE_PADDLE_PYTHON=sys.executable)
    r = subprocess.run([sys.executable, "-m", "cli", "run", split, "--local"], cwd=ROOT,
                       env=env, capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    line, = r.stderr.splitlines()
    assert "Paddle 2.6.2 is not importable" in line
    assert "pip install 'pstranspile[paddle]'" in line and "--paddle-python" in line


def test_a_split_without_plan_json_needs_its_config(tmp_path):
    split = _split(tmp_path, "ps/two_tables_sgd_sync")
    os.remove(os.path.join(split, "plan.json"))
    r = CliRunner().invoke(cli, ["run", split, "--local"])
    assert r.exit_code == 2 and "give --cluster CONFIG" in r.output


POISON = textwrap.dedent("""
    import sys
    class Poison:
        def find_spec(self, name, path=None, target=None):
            if name == "paddle" or name.startswith("paddle."):
                raise ImportError("poisoned: %s imported" % name)
    sys.meta_path.insert(0, Poison())
    from click.testing import CliRunner
    from transpile.commands.root import main
    c, out = sys.argv[1], sys.argv[2]
    inputs = [c + "/main.pb", "--startup", c + "/startup.pb", "--cluster", c + "/cluster.yaml"]
    for args in (["split"] + inputs + ["--out", out], ["check"] + inputs[:1] + [out] + inputs[1:],
                 ["simulate"] + inputs[:1] + [out] + inputs[1:] + ["--steps", "2"]):
        r = CliRunner().invoke(main, ["-q"] + args)
        assert r.exit_code == 0, (args[0], r.output, r.exception)
    assert not [m for m in sys.modules if m == "paddle" or m.startswith("paddle.")]
    print("paddle-free")
""")


def test_split_check_and_simulate_never_import_paddle(tmp_path):
    c = os.path.join(CORPUS, "ps", "two_tables_sgd_sync")
    r = subprocess.run([sys.executable, "-c", POISON, c, str(tmp_path / "s")], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0 and "paddle-free" in r.stdout, r.stderr[-2000:]


def test_the_poison_is_seen():
    # the poisoned import fails loudly: the test above would catch an import of paddle
    code = POISON.split("from click")[0] + "import paddle\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode != 0 and "poisoned: paddle imported" in r.stderr


# --- one role of a cluster: the launcher's environment --------------------------------------
CFG = os.path.join(CORPUS, "ps", "two_tables_sgd_sync", "cluster.yaml")
PS_LIST = "10.0.0.1:6000,10.0.0.2:6000"


def test_a_role_from_fleetruns_environment():
    cfg = load_config(CFG)
    env = {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": "1", "PADDLE_TRAINERS_NUM": "2",
           "PADDLE_PSERVERS_IP_PORT_LIST": PS_LIST}
    assert which_role(RoleOptions(), cfg, env) == ("trainer", 1, PS_LIST.split(","))
    env = {"TRAINING_ROLE": "PSERVER", "POD_IP": "10.0.0.2", "PADDLE_PORT": "6000",
           "PADDLE_PSERVERS_IP_PORT_LIST": PS_LIST}
    assert which_role(RoleOptions(), cfg, env) == ("pserver", 1, PS_LIST.split(","))
    # the flags win over the environment
    assert which_role(RoleOptions(role="PSERVER", endpoint="10.0.0.1:6000"), cfg, env)[:2] == \
        ("pserver", 0)


@pytest.mark.parametrize("env, opts, says", [
    ({}, RoleOptions(), "which role?"),
    ({"TRAINING_ROLE": "TRAINER"}, RoleOptions(), "which pservers?"),
    ({"TRAINING_ROLE": "TRAINER", "PADDLE_PSERVERS_IP_PORT_LIST": "a:1"}, RoleOptions(),
     "1 pservers given"),
    ({"TRAINING_ROLE": "TRAINER", "PADDLE_PSERVERS_IP_PORT_LIST": PS_LIST,
      "PADDLE_TRAINERS_NUM": "3"}, RoleOptions(), "PADDLE_TRAINERS_NUM is 3"),
    ({"TRAINING_ROLE": "TRAINER", "PADDLE_PSERVERS_IP_PORT_LIST": PS_LIST,
      "PADDLE_TRAINER_ID": "2"}, RoleOptions(), "which trainer?"),
    ({"TRAINING_ROLE": "PSERVER", "PADDLE_PSERVERS_IP_PORT_LIST": PS_LIST, "POD_IP": "10.0.0.3",
      "PADDLE_PORT": "6000"}, RoleOptions(), "is not in the pservers' list"),
])
def test_a_role_that_cannot_be_told_is_refused(env, opts, says):
    with pytest.raises(UserError, match=says):
        which_role(opts, load_config(CFG), env)


# --- the verdict ------------------------------------------------------------------------------
def _run(got_w, reports=None, exits=None):
    pred = Prediction(feeds={"s0.t0.x": np.zeros(1), "s1.t0.x": np.zeros(1)},
                      values={"trainer_0": {"dense/w": np.array([1.0, 2.0]),
                                            "sparse/0": np.array([[0.5]])}},
                      names={"0": "emb"}, keys={"0": [3]})
    run = LocalRun(pred, "/tmp/w", "sync", seconds=1.0)
    run.values = {"trainer_0": {"dense/w": np.array(got_w), "sparse/0": np.array([[0.5]])}}
    run.reports = reports or {"trainer0": {"step": "done"}}
    run.exits = exits or {"trainer0": 0}
    return run


def test_the_verdict_names_the_parameter_that_differs():
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    assert compare(_run([1.0, 2.0 + 1e-7]), "s", cfg).exit_code == 0
    v = compare(_run([1.0, 2.01]), "s", cfg)
    assert v.exit_code == 1 and v.differing == ["w"] and v.steps == 2
    assert "1 of 2 parameters differ from simulate's prediction: w" in to_json(v)["summary"]
    assert 'failures="1"' in render_junit(v)


def test_the_verdict_names_a_trainer_that_died_with_its_op():
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0], reports={"trainer0": {"step": 0, "op": "sum",
                                                 "error": "PreconditionNotMetError: no memory"}},
               exits={"trainer0": 1})
    v = compare(run, "s", cfg)
    assert v.exit_code == 1
    assert v.failures == ["trainer_0 died at step 0 in op sum: PreconditionNotMetError: "
                          "no memory"]
    run = _run([1.0, 2.0], reports={"trainer0": {"step": 3}}, exits={"trainer0": -11})
    assert compare(run, "s", cfg).failures[0].startswith(
        "trainer_0 was killed by signal 11 at step 3")


def test_a_value_that_did_not_move_is_said_to_prove_nothing():
    from transpile.runtime.verdict import render_text
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0])
    run.prediction.start = {"dense/w": np.array([0.0, 2.0]), "sparse/0": np.array([[0.5]])}
    v = compare(run, "s", cfg)
    assert v.exit_code == 0 and v.unmoved == ["trainer_0 emb"] and v.vacuous == ["emb"]
    lines = []
    render_text(v, lines.append)
    assert any(ln.endswith("ok, did not move: proves nothing") and "emb" in ln for ln in lines)
    assert lines[-1].startswith("vacuous: 1 of 2 values did not move from their initial "
                                "values (beyond their tolerance): trainer_0 emb;")
    # --expect-equal fails it, --accept-unchanged accepts it by name
    strict = compare(run, "s", cfg, expect_equal=True)
    assert strict.exit_code == 1 and 'type="vacuous"' in render_junit(strict)
    assert to_json(strict)["vacuous"] == ["emb"]
    assert compare(run, "s", cfg, expect_equal=True, accepted=["em*"]).exit_code == 0
    run.prediction.start["sparse/0"] = np.array([[0.0]])
    assert compare(run, "s", cfg, expect_equal=True).exit_code == 0


def test_a_pserver_that_dies_while_the_trainers_train_is_named(tmp_path):
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0], exits={"trainer0": "stopped", "pserver1": -6})
    run.work = str(tmp_path)
    (tmp_path / "pserver1.json").write_text('{"step": "serving"}')    # it had started
    run.deaths = {1: -6}
    v = compare(run, "s", cfg)
    assert v.exit_code == 1
    assert v.failures == ["pserver_1 was killed by signal 6 while the trainers trained "
                          "(log: %s/pserver1.log)" % tmp_path]
    assert to_json(v)["summary"] == "the split does not train on Paddle's runtime (1 pserver " \
                                    "failed)"


def test_a_pserver_that_cannot_start_from_an_empty_initializer_is_paddles_fault(tmp_path):
    # ps-gen/inits_adam_sync: the_one_ps writes "" for the Param of a dense table whose first
    # param an assign fills; Paddle's pserver segfaults in CreateInitializer, on Paddle's own
    # split too: the prediction's tables know it, and the failure says so in its one line
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0], exits={"trainer0": "stopped", "pserver0": -11})
    run.work = str(tmp_path)                    # no pserver0.json: it never served
    run.deaths = {0: -11}
    run.prediction.empty_inits = [(1, "Param")]
    v = compare(run, "s", cfg)
    assert v.exit_code == 1 and len(v.failures) == 1
    assert v.failures[0].startswith(
        "pserver_0 was killed by signal 11 at its start: table 1's Param has an empty "
        "initializer, which Paddle's MemoryDenseTable::CreateInitializer cannot read")
    assert "Paddle's fault, not the split's" in v.failures[0]
    assert "\n" not in v.failures[0]
    run.prediction.empty_inits = []             # no cause known: only where it died
    assert compare(run, "s", cfg).failures == [
        "pserver_0 was killed by signal 11 at its start (log: %s/pserver0.log)" % tmp_path]


def test_the_launcher_stops_the_trainers_when_a_pserver_dies(tmp_path):
    # a pserver that exits while a trainer still runs: the trainer is told (the abort token)
    # and stopped, the pserver recorded as dead, nothing waits for the deadline
    import time
    from transpile.runtime.local import _watch
    (tmp_path / "sync").mkdir()
    run = LocalRun(Prediction(), str(tmp_path), "sync")
    server = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"],
                              start_new_session=True)
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                               start_new_session=True)
    t0 = time.time()
    _watch(run, [server], [trainer], t0 + 50)
    assert time.time() - t0 < 20 and trainer.poll() is not None
    assert run.deaths == {0: 3} and run.exits == {"pserver0": 3, "trainer0": "stopped"}
    assert (tmp_path / "sync" / "abort").is_file()


def test_pservers_stopped_at_the_end_are_no_failure(tmp_path):
    # trainer 0 stops the pservers when it is done; they exit 0 while trainer 1 may still be
    # ending: nobody is stopped
    from transpile.runtime.local import _watch
    (tmp_path / "sync").mkdir()
    run = LocalRun(Prediction(), str(tmp_path), "sync")
    server = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    server.wait()
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"],
                               start_new_session=True)
    _watch(run, [server], [trainer], 1e12)
    assert run.deaths == {} and run.exits == {"trainer0": 0}


def test_a_run_folder_used_again_starts_clean(tmp_path):
    # an abort token or a trainer's results left by an earlier run in the same --work folder
    # would stop this run's trainers at once or stand for results they never wrote
    from transpile.runtime.local import clear_run
    (tmp_path / "sync").mkdir()
    for name in ("sync/abort", "sync/turn.3", "trainer0.npz", "trainer1.json", "trace0.npz",
                 "pserver1.log", "feeds.npz", "mine.txt"):
        (tmp_path / name).write_text("old")
    clear_run(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["feeds.npz", "mine.txt", "sync"]
    assert not os.listdir(tmp_path / "sync")


def test_pushed_gradients_are_held_to_their_own_tolerance():
    # a trainer's gradient rounds through its forward and backward in Paddle's kernels: held to
    # GRAD_RTOL (1e-5) times max(1, its largest value); the parameters stay at rtol
    from transpile.runtime.buckets import GRAD_RTOL
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0])
    run.prediction.values["trainer_0"]["grad/0"] = np.array([1.25, -0.5])
    run.values["trainer_0"]["grad/0"] = np.array([1.25 + 1.4e-6, -0.5])
    v = compare(run, "s", cfg)
    row = [d for d in v.diffs if d.key == "grad/0"][0]
    assert v.exit_code == 0 and row.name == "dense table 0"
    assert row.tol == pytest.approx(GRAD_RTOL * 1.25)
    run.values["trainer_0"]["grad/0"] = np.array([1.25 + 1e-4, -0.5])
    v = compare(run, "s", cfg)
    assert v.exit_code == 1 and v.differing == ["dense table 0"]


def test_a_geo_trainer_that_hangs_in_init_params_with_two_dense_tables_is_named(tmp_path):
    # ps-gen/datanorm_sgd_geo: data_norm's statistics are a second geo dense table; Paddle's
    # GeoCommunicator::InitParams waits at the BarrierTable once per dense table at once, and
    # the barrier counts trainer ids: the start hangs, on Paddle's own split too
    cfg = load_config(CFG)
    cfg = cfg.__class__(**{**cfg.__dict__, "trainers": 1})
    run = _run([1.0, 2.0], reports={"trainer0": {"step": "start"}},
               exits={"trainer0": "timeout"})
    run.work = str(tmp_path)
    (tmp_path / "sync").mkdir()
    (tmp_path / "sync" / "init_params.0").write_text("")
    run.prediction.geo = {"dense": [{"table_id": 1}, {"table_id": 2}], "sparse": []}
    line = compare(run, "s", cfg).failures[0]
    assert line.startswith("trainer_0 timed out at its start in Paddle's "
                           "GeoCommunicator::InitParams: its 2 dense tables' InitDense run at "
                           "once")
    assert "Paddle's fault, not the split's" in line
    (tmp_path / "sync" / "pushed.0").write_text("")     # it got past init_params: not there
    assert compare(run, "s", cfg).failures[0] == (
        "trainer_0 timed out at its start (log: %s/trainer0.log)" % tmp_path)


@pytest.mark.parametrize("wrote_logs", [False, True])
def test_a_run_that_stops_early_removes_its_folder_or_names_it(tmp_path, monkeypatch, capsys,
                                                               wrote_logs):
    # refused before a role started (a port in use, an interrupt): its temporary folder goes;
    # once a role has written its log, the folder stays and is named (the log says why)
    import tempfile

    import transpile.runtime.local as local
    from transpile.commands import run as runcmd
    from transpile.runtime.local import LocalOptions
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def stops(split_dir, config, paddle, opts, work, progress=None):
        if wrote_logs:
            (tmp_path / os.path.basename(work) / "pserver0.log").write_text("F1207 ...")
        raise UserError("port 6174 of 127.0.0.1 is in use")
    monkeypatch.setattr(local, "run_local", stops)
    with pytest.raises(UserError):
        runcmd._run_local("split", None, None, LocalOptions(), "text", None, {})
    left = os.listdir(tmp_path)
    err = capsys.readouterr().err
    if wrote_logs:
        assert len(left) == 1 and left[0].startswith("pstranspile-run-")
        assert "the run folder (logs) is kept: %s" % (tmp_path / left[0]) in err
    else:
        assert left == [] and err == ""
