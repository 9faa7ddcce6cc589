"""bench/run.py's machinery: paired runs and the median of their ratios, the floor_out process,
the options. No timing asserts here."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import run as bench_run  # noqa: E402
from run_floor import pb_bytes, serialize_until  # noqa: E402
from run_measure import Run, measure, pair_ratios  # noqa: E402

CASE = os.path.join(ROOT, "tests", "corpus", "fleet", "mlp_sgd_sync")


def test_ratio_is_the_median_of_the_paired_ratios():
    r = Run("ok", times=[2.0, 4.0, 9.0], floor_times=[1.0, 1.0, 3.0])
    assert r.ratios == [2.0, 4.0, 3.0]
    assert r.ratio == 3.0                                  # not median(t) / median(f) = 4
    assert (r.median, r.floor_median) == (4.0, 1.0)
    assert Run("ok", times=[1.0]).ratio is None            # not paired
    assert Run("failed", times=[1.0], floor_times=[1.0]).ratio is None
    with pytest.raises(ValueError):
        pair_ratios([1.0, 2.0], [1.0])


class FakeRunner:
    """Stands in for run_once: records the order of the processes, returns given times."""

    def __init__(self, walls, floor_rc=0):
        self.walls, self.floor_rc, self.calls = list(walls), floor_rc, []

    def before(self):
        self.calls.append("before")

    def paired(self):
        self.calls.append("paired")
        return ["floor", "123"], 123

    def __call__(self, cmd, timeout, cwd=None):
        self.calls.append(cmd[0])
        rc = self.floor_rc if cmd[0] == "floor" else 0
        return self.walls.pop(0), 2 ** 20, rc, "boom\n" if rc else ""


def test_measure_runs_each_floor_right_after_its_run():
    fake = FakeRunner([3.0, 1.0, 8.0, 2.0, 5.0, 1.0])
    r = measure(["split"], 3, 60, before=fake.before, paired=fake.paired, run=fake)
    assert fake.calls == ["before", "split", "paired", "floor"] * 3
    assert r.ok and r.times == [3.0, 8.0, 5.0] and r.floor_times == [1.0, 2.0, 1.0]
    assert r.ratios == [3.0, 4.0, 5.0] and r.ratio == 4.0 and r.out_bytes == 123
    plain = measure(["show"], 2, 60, run=FakeRunner([1.0, 2.0]))
    assert plain.ok and plain.times == [1.0, 2.0] and plain.ratio is None


def test_measure_a_failed_floor_fails_the_figure():
    fake = FakeRunner([3.0, 1.0], floor_rc=2)
    r = measure(["split"], 3, 60, paired=fake.paired, run=fake)
    assert r.status == "failed" and "floor_out" in r.note and "boom" in r.note


def test_pb_bytes_counts_only_pb_files(tmp_path):
    (tmp_path / "trainer_0").mkdir()
    (tmp_path / "trainer_0" / "main.pb").write_bytes(b"x" * 10)
    (tmp_path / "trainer_0" / "runtime.json").write_bytes(b"y" * 100)
    (tmp_path / "pserver_a_1" / "deep").mkdir(parents=True)
    (tmp_path / "pserver_a_1" / "deep" / "startup.pb").write_bytes(b"z" * 7)
    (tmp_path / "server_desc.txt").write_bytes(b"w" * 50)
    assert pb_bytes(tmp_path) == 17


def test_serialize_until_refuses_empty_programs():
    class Empty:
        def ByteSize(self):
            return 0
    with pytest.raises(ValueError):
        serialize_until([Empty(), Empty()], 10)


@pytest.mark.parametrize("rounds", [0, 1, 3])
def test_floor_process_writes_at_least_out_bytes(rounds):
    main, startup = os.path.join(CASE, "main.pb"), os.path.join(CASE, "startup.pb")
    one = os.path.getsize(main) + os.path.getsize(startup)
    want = rounds * one + (1 if rounds else 0)
    cmd = [sys.executable, os.path.join(BENCH, "run_floor.py"), main, startup, str(want)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    produced = int(p.stdout)
    assert want <= produced < want + one                  # stops once it has enough
    assert produced % one in (0, os.path.getsize(main))   # whole programs, main then startup


def test_floor_process_bad_arguments():
    p = subprocess.run([sys.executable, os.path.join(BENCH, "run_floor.py"), "x.pb"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "usage" in p.stderr


def test_options():
    a = bench_run.parse_args(["--silent"])
    assert a.styles == ["classic", "fleet", "ps"] and a.pservers == [2, 16, 64]
    assert a.check_pservers == [2, 16, 64] and a.repeats == 3
    a = bench_run.parse_args(["--quick", "--check-pservers", "2,64"])
    assert a.check_pservers == [2, 64] and a.sizes == [300, 1000] and a.repeats == 1
    a = bench_run.parse_args(["--pservers", "4,8", "--check-pservers", "all"])
    assert a.check_pservers == [4, 8]
    for bad in (["--check-pservers", "3"], ["--check-pservers", "x"], ["--styles", "nope"]):
        with pytest.raises(SystemExit):
            bench_run.parse_args(bad)


def test_labels_check_every_split():
    a = bench_run.parse_args(["--styles", "fleet,ps", "--pservers", "2,16",
                              "--check-pservers", "16"])
    b = bench_run.Bench.__new__(bench_run.Bench)
    b.args = a
    assert b.labels() == ["floor", "split fleet p2", "split fleet p16", "split ps p2",
                          "split ps p16", "check fleet p16", "check ps p16", "diff", "show"]
    assert b.diff_split() == ("fleet", 16)


def test_floor_process_refuses_another_protobuf_backend():
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python")
    p = subprocess.run([sys.executable, os.path.join(BENCH, "run_floor.py"),
                        os.path.join(CASE, "main.pb"), os.path.join(CASE, "startup.pb"), "10"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2 and "not upb" in p.stderr


def _fake_bench(check_p64):
    """A finished bench of one kind and size, without running anything."""
    import types
    a = bench_run.parse_args(["--sizes", "5000", "--kinds", "ctr", "--styles", "fleet",
                              "--pservers", "2,64", "--timeout", "60"])
    b = bench_run.Bench.__new__(bench_run.Bench)
    b.args = a
    b.inputs = {("ctr", 5000): {"ops_main": 5003, "params": 1, "bytes_main": 2 ** 20,
                                "bytes_startup": 2 ** 20, "generate_seconds": 0.1}}

    def paired(t, f, out=10 ** 6, peak=3 * 2 ** 20):
        r = Run("ok", times=t, rss=[peak] * len(t), floor_times=f)
        r.out_bytes = out
        return r
    b.results = {("ctr", 5000): {
        "floor": Run("ok", [0.5], [2 ** 20]), "diff": Run("ok", [1.0], [2 ** 20]),
        "show": Run("n/a", note="no `show` command"),
        "split fleet p2": paired([2.0, 9.0, 2.0], [1.0, 1.0, 1.0]),
        "split fleet p64": paired([2.5, 2.5, 2.5], [1.0, 1.0, 1.0]),
        "check fleet p2": paired([1.0], [1.0], peak=12 * 2 ** 20),
        "check fleet p64": check_p64}}
    b.input_bytes = types.MethodType(bench_run.Bench.input_bytes, b)
    return b


def test_report_targets_use_the_paired_ratios():
    import run_report
    text = run_report.report(_fake_bench(Run("timeout", note="killed after 60s")), 1.0)
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in text.splitlines()
            if ln.startswith("| split ≤") or ln.startswith("| check")}
    split = rows["split ≤ 3× floor_out at every size from 5k ops"]
    assert "| met so far" in split and "2.50× (ctr 5000 ops, split fleet p64)" in split
    check = [v for k, v in rows.items() if k.startswith("check ≤")][0]
    assert "**not met**" in check and "timed out (> 60 s)" in check
    mem = [v for k, v in rows.items() if k.startswith("check peak")][0]
    assert "**not met**" in mem and "6.00× (ctr 5000 ops, check fleet p2)" in mem
    assert "| split fleet p2 | 2.00 | 1.00 | 1.0 | 2.00× |" in text
    text = run_report.report(_fake_bench(Run("ok", [1.0], [2 ** 20], floor_times=[1.0])), 1.0)
    check = [ln for ln in text.splitlines() if ln.startswith("| check ≤")][0]
    assert "| met |" in check


def test_a_figure_that_timed_out_is_not_run_at_larger_sizes(monkeypatch):
    calls = []

    def fake_measure(cmd, repeats, timeout, **kw):
        calls.append(cmd)
        return Run("timeout", note="killed") if cmd == ["slow"] else Run("ok", [1.0], [1])
    monkeypatch.setattr(bench_run, "measure", fake_measure)
    b = bench_run.Bench.__new__(bench_run.Bench)
    b.args, b.commands, b.timed_out, b.log = bench_run.parse_args([]), {"check"}, {}, print
    for size in (5000, 20000):
        b.kind, b.size, res = "ctr", size, {}
        b.go(res, "check x", ["slow"], needs="check")
        b.go(res, "check y", ["fast"], needs="check")
    assert calls == [["slow"], ["fast"], ["fast"]]
    assert res["check x"].status == "timeout" and "at 5000 ops" in res["check x"].note


def test_write_results_keeps_what_follows_the_kept_line(tmp_path):
    """bench/RESULTS.md's simulate figures (bench/run_simulate.py, recorded by hand after the
    KEPT line) survive `run.py --write-results`, which rewrites the rest."""
    p = tmp_path / "RESULTS.md"
    assert bench_run.with_kept_tail("new\n", str(p)) == "new\n"      # no file yet
    p.write_text("old table\n\n%s\n## simulate\n| a |\n" % bench_run.KEPT)
    assert bench_run.with_kept_tail("new table\n", str(p)) == \
        "new table\n\n%s\n## simulate\n| a |\n" % bench_run.KEPT
    p.write_text("old table only\n")
    assert bench_run.with_kept_tail("new\n", str(p)) == "new\n"
