"""`split` writes each program as soon as it is built and lets it go (SplitResult.emit): the
folder it writes must be exactly what the programs kept in memory would give, and a failure
while writing must still leave no output behind. Split and check share their pieces of work
with a forked child: the output is one process's."""
import importlib
import os

import pytest
from click.testing import CliRunner

from cli import main
from transpile.core.errors import UserError
from transpile.format import programio
from transpile.output import outdir
from transpile.output.runtime import runtime_bytes
from transpile.render.report import render_report
from transpile.split import split

from golden import CORPUS, load_case, split_args, tree_files
from test_check import MUTATIONS, Split, _applies, case_path, mutate, run_check

CASES = [("classic", "l2decay_piecewise"), ("classic", "dist_lookup_table"),
         ("fleet", "ctr_sparse_adam_sync"), ("fleet", "lrdecay_momentum_async")]


@pytest.mark.parametrize("family,name", CASES)
def test_written_split_equals_the_split_kept_in_memory(tmp_path, family, name):
    case = os.path.join(CORPUS, family, name)
    out = str(tmp_path / "out")
    r = CliRunner().invoke(main, split_args(case, out) + ["--quiet"])
    assert r.exit_code == 0, r.output
    written = tree_files(out)

    main_prog, startup, config = load_case(family, name)
    kept = split(main_prog, startup, config)
    assert kept.programs and not kept.sink
    expected = {k + ".pb": programio.to_bytes(p) for k, p in kept.programs.items()}
    expected.update({k + "/runtime.json": runtime_bytes(rt) for k, rt in kept.runtime.items()})
    expected["plan.json"] = outdir.json_bytes(kept.plan)
    expected["report.md"] = render_report(main_prog, kept.programs, kept.plan,
                                          title=os.path.join(case, "main.pb"),
                                          config=config).encode("utf-8")
    assert sorted(written) == sorted(expected)
    for rel in expected:
        assert written[rel] == expected[rel], rel


def test_a_sink_gets_every_program_once_and_none_is_kept():
    main_prog, startup, config = load_case("classic", "l2decay_piecewise")
    seen = []

    class Sink:
        def program(self, key, prog):
            seen.append(key)

        def text(self, rel, text):
            seen.append(rel)

    result = split(main_prog, startup, config, sink=Sink())
    assert result.programs == {}
    assert len(seen) == len(set(seen)) == len(result.summaries)
    assert set(seen) == set(result.summaries)
    assert any(k.startswith("pserver_") and k.endswith("/main") for k in seen)
    # the plan is the same whether the programs were kept or handed over
    assert result.plan == split(main_prog, startup, config).plan


def test_chunks_join_to_the_encoded_program():
    main_prog, _, _ = load_case("fleet", "ctr_sparse_adam_sync")
    chunks = list(programio.to_chunks(main_prog))
    assert len(chunks) > 1
    assert b"".join(chunks) == programio.to_bytes(main_prog)


def test_a_write_failing_mid_split_leaves_nothing(tmp_path, monkeypatch):
    """The disk fills up after the first pserver program was written: exit 2 with one line,
    no output folder, no temporary folder left beside it."""
    case = os.path.join(CORPUS, "classic", "l2decay_piecewise")
    real_write = outdir.Staging.write
    written = []

    def write(self, rel, data):
        if rel.startswith("pserver_") and written:
            raise OSError(28, "No space left on device")
        real_write(self, rel, data)
        if rel.startswith("pserver_"):
            written.append(rel)

    monkeypatch.setattr(outdir.Staging, "write", write)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, split_args(str(case), str(out)))
    assert r.exit_code == 2
    assert "cannot write" in r.output and "No space left" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert written and os.listdir(tmp_path) == []


@pytest.mark.parametrize("failing", ["plan.json", "runtime.json", "report.md", ".pb"])
def test_a_json_write_failing_in_the_child_leaves_nothing(tmp_path, monkeypatch, failing):
    """plan.json is written by a forked child while the parent writes report.md; runtime.json
    and the programs by whichever of the two processes sharing the pieces makes them: a
    write failing in any process is exit 2 with one line, nothing left."""
    from transpile.core import forked
    monkeypatch.setattr(forked, "MIN_FORKED_OPS", 0)
    monkeypatch.setenv("PSTRANSPILE_WORKERS", "2")
    case = os.path.join(CORPUS, "fleet", "ctr_sparse_adam_sync")
    real_write = outdir.Staging.write
    parent = os.getpid()

    def write(self, rel, data):
        # ".pb": a program written by the child sharing the pieces (the parent held back)
        if rel.endswith(failing) and (failing != ".pb" or os.getpid() != parent):
            if os.getpid() != parent:
                # the child's own record is lost with it: tell the parent through the disk
                (tmp_path / "in_child").write_text(rel)
            raise OSError(28, "No space left on device")
        real_write(self, rel, data)

    monkeypatch.setattr(outdir.Staging, "write", write)
    split_module = importlib.import_module("transpile.split")
    started = split_module._FolderSink.plan_started

    def held_back(self, parts):
        import time
        time.sleep(0.3)                 # the child takes the first pieces meanwhile
        started(self, parts)
    monkeypatch.setattr(split_module._FolderSink, "plan_started", held_back)
    out = tmp_path / "out"
    r = CliRunner().invoke(main, split_args(case, str(out)))
    assert r.exit_code == 2, r.output
    assert "cannot write" in r.output and "No space left" in r.output
    assert len(r.output.strip().splitlines()) == 1
    in_child = (tmp_path / "in_child").exists()
    if failing != "runtime.json":
        assert in_child == (failing != "report.md")
    if in_child:
        (tmp_path / "in_child").unlink()
    assert os.listdir(tmp_path) == []


def test_a_write_failing_mid_split_keeps_the_previous_split(tmp_path, monkeypatch):
    case = os.path.join(CORPUS, "classic", "l2decay_piecewise")
    out = tmp_path / "out"
    assert CliRunner().invoke(main, split_args(case, str(out))).exit_code == 0
    before = tree_files(str(out))

    def write(self, rel, data):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(outdir.Staging, "write", write)
    r = CliRunner().invoke(main, split_args(case, str(out)) + ["--force"])
    assert r.exit_code == 2
    assert tree_files(str(out)) == before
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("family,name,n,all_ids", [
    ("classic", "l2decay_piecewise", 4, False), ("fleet", "ctr_sparse_adam_sync", 4, False),
    ("classic", "l2decay_piecewise", 2, True), ("fleet", "ctr_sparse_adam_async", 2, True),
    ("ps", "ctr_adam_sync", 2, True), ("ps", "ctr_adam_geo", 3, False)])
def test_a_forked_child_writes_the_same_split(tmp_path, monkeypatch, family, name, n, all_ids):
    """The pieces of the split shared with a forked child (PSTRANSPILE_WORKERS=2; at 2 or 3
    pservers only for a large program, so the threshold is lowered here): the folder is byte
    for byte the one process's, plan.json and report.md included (gathered in the pieces'
    order whoever built which), with every trainer too (`--trainer-id all`)."""
    from transpile.core.config import load_config_text
    from transpile.core import forked
    monkeypatch.setattr(forked, "MIN_FORKED_OPS", 0)
    case = os.path.join(CORPUS, family, name)
    with open(os.path.join(case, "cluster.yaml")) as f:
        text = f.read()
    cfg = tmp_path / "c.yaml"
    eps = ["127.0.0.1:%d" % (7000 + i) for i in range(n)]
    cfg.write_text("\n".join(l for l in text.splitlines() if not l.startswith(("pservers",
                                                                                "  -", "- ")))
                   + "\npservers: [%s]\n" % ", ".join('"%s"' % e for e in eps))
    assert load_config_text(cfg.read_text()).pservers == tuple(eps)
    outs = []
    forks = []
    real = forked.Forked
    monkeypatch.setattr(forked, "Forked", lambda fn: forks.append(1) or real(fn))
    ahead = []                      # plan.json entries encoded while the programs are built
    real_spill = outdir.spill_entries   # (to a scratch file, removed before the folder is put)
    monkeypatch.setattr(outdir, "spill_entries", lambda obj, path: ahead.extend(obj) or
                        real_spill(obj, path))
    for workers in ("1", "2"):
        monkeypatch.setenv("PSTRANSPILE_WORKERS", workers)
        out = str(tmp_path / ("out" + workers))
        r = CliRunner().invoke(main, ["split", os.path.join(case, "main.pb"), "--startup",
                                      os.path.join(case, "startup.pb"), "--cluster", str(cfg),
                                      "--out", out, "--quiet"]
                               + (["--trainer-id", "all"] if all_ids else []))
        assert r.exit_code == 0, r.output
        outs.append(tree_files(out))
    assert forks == [1]                 # the second split was shared with a child
    # plan.json's params (ps: tables) and all it takes from the plan alone encoded ahead, by
    # the parent, in the second split only
    assert ("tables" if family == "ps" else "params") in ahead and \
        len(ahead) == len(set(ahead)) and "programs" not in ahead
    assert sorted(outs[0]) == sorted(outs[1]) and len(outs[0]) > 6
    for rel in outs[0]:
        assert outs[0][rel] == outs[1][rel], rel


def test_a_child_that_fails_leaves_nothing(tmp_path, monkeypatch):
    """A refusal met by the forked child's pserver: exit 2, its one line, no folder."""
    from transpile.core import forked
    monkeypatch.setenv("PSTRANSPILE_WORKERS", "2")
    real = forked.Forked.__init__

    def failing(self, fn):
        def boom():
            raise UserError("pserver refused in the child")
        real(self, boom)
    monkeypatch.setattr(forked.Forked, "__init__", failing)
    case = os.path.join(CORPUS, "fleet", "mlp_sgd_sync")
    out = str(tmp_path / "out")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pservers: [a:1, a:2, a:3, a:4]\ntrainers: 2\n")
    r = CliRunner().invoke(main, ["split", os.path.join(case, "main.pb"), "--startup",
                                  os.path.join(case, "startup.pb"), "--cluster", str(cfg),
                                  "--out", out])
    assert r.exit_code == 2 and "pserver refused in the child" in r.output
    assert not os.path.exists(out) and os.listdir(tmp_path) == ["c.yaml"]


def test_work_done_first_by_the_parent_and_its_failure():
    """share_pieces' first(): run by the parent before it takes a piece (the child takes the
    pieces meanwhile); when it fails, the child stops after its piece and the error is
    raised here."""
    from transpile.core import forked
    order = []
    made, theirs = forked.share_pieces(
        6, lambda i: i * 10, lambda q: forked.take_pieces(q, lambda i: -i),
        first=lambda: order.append("first"))
    assert order == ["first"] and sorted(list(made) + list(theirs)) == list(range(6))

    def fail():
        raise UserError("first failed")
    with pytest.raises(UserError, match="first failed"):
        forked.share_pieces(50, lambda i: i, lambda q: forked.take_pieces(
            q, lambda i: __import__("time").sleep(0.01)), first=fail)


def test_the_work_queue_gives_each_index_to_one_process():
    """The queue of pieces split and check share: a forked child and the parent each take
    indices until none are left; together they take every index once."""
    from transpile.core.forked import Forked, WorkQueue
    queue = WorkQueue(500)
    child = Forked(lambda: list(queue))
    mine = list(queue)
    theirs = child.result()
    queue.close()
    assert sorted(mine + theirs) == list(range(500))
    assert mine == sorted(mine) and theirs == sorted(theirs)


def test_the_work_queue_gives_the_indices_in_the_order_asked():
    from transpile.core.forked import WorkQueue, share_pieces, take_pieces
    order = [3, 0, 4, 1, 2]
    queue = WorkQueue(5, order)
    assert list(queue) == order
    queue.close()
    mine, theirs = share_pieces(5, lambda i: i * i,
                                lambda q: take_pieces(q, lambda i: i * i), order=order)
    assert {**mine, **theirs} == {i: i * i for i in range(5)}


def test_a_split_builds_its_longest_pieces_first():
    """Two processes take a split's pieces a trainer's main program first, then the trainers'
    startup programs and files, then the pservers (each kind in its own order)."""
    from transpile.split import _longest_first
    from transpile.styles.base import Unit
    units = [Unit("trainer", t, part) for t in (0, 1) for part in ("main", "startup", "files")]
    units += [Unit("pserver", ep) for ep in ("a:1", "a:2")]
    assert [(u.role, u.who, u.part) for u in map(units.__getitem__, _longest_first(units))] \
        == [("trainer", 0, "main"), ("trainer", 1, "main"), ("trainer", 0, "startup"),
            ("trainer", 0, "files"), ("trainer", 1, "startup"), ("trainer", 1, "files"),
            ("pserver", "a:1", ""), ("pserver", "a:2", "")]


@pytest.mark.parametrize("who", ["parent", "child"])
def test_a_failing_process_leaves_the_other_nothing_to_build(tmp_path, monkeypatch, who):
    """A trainer refused in one process (the one that takes it first): the pieces still queued
    are taken off the queue, so the other process stops after the pserver it is building;
    exit 2, nothing written. `who`: the process that takes the trainer's main program (the
    parent or the child, held back a little so that the other takes it)."""
    from transpile.core import forked
    from transpile.styles import base
    monkeypatch.setenv("PSTRANSPILE_WORKERS", "2")
    built = tmp_path / "built"
    built.mkdir()
    real = base.Style.build
    parent = os.getpid()

    def build(self, prep, unit, result, run):
        import time
        if unit.role == "pserver":
            (built / unit.who.replace(":", "_")).write_text("")
            time.sleep(0.2)
        elif unit.part == "main":
            time.sleep(0.3)
            raise UserError("trainer refused in the %s"
                            % ("parent" if os.getpid() == parent else "child"))
        return real(self, prep, unit, result, run)
    real_fork = forked.Forked.__init__

    def fork(self, fn):
        def late():
            import time
            if who == "parent":
                time.sleep(0.1)         # the parent takes the first piece
            return fn()
        real_fork(self, late)
        if who == "child" and os.getpid() == parent:
            import time
            time.sleep(0.1)             # the child takes the first piece
    monkeypatch.setattr(base.Style, "build", build)
    monkeypatch.setattr(forked.Forked, "__init__", fork)
    case = os.path.join(CORPUS, "fleet", "mlp_sgd_sync")
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pservers: [%s]\ntrainers: 2\n" % ", ".join("a:%d" % (i + 1) for i in range(40)))
    out = str(tmp_path / "out")
    r = CliRunner().invoke(main, ["split", os.path.join(case, "main.pb"), "--startup",
                                  os.path.join(case, "startup.pb"), "--cluster", str(cfg),
                                  "--out", out])
    assert r.exit_code == 2 and "trainer refused in the %s" % who in r.output
    assert not os.path.exists(out)
    assert 0 < len(os.listdir(built)) < 30          # not all 40: the queue was emptied


# ---------------------------------------------------------------------------------------------
# a check whose pservers a forked child shares (check/stream.py)

FORK_PAIRS = [(c, k) for c in ("classic/l2decay_piecewise", "fleet/ctr_sparse_adam_sync",
                               "paddlerec-fleet/esmm_sync", "paddlerec-classic/esmm_sync")
              for k in (None, "shrink_block", "drop_opt_op", "fanin", "drop_scale",
                        "dup_block", "undeclared_var", "drop_init",
                        # what the trainer checks find (run aside)
                        "drop_send", "drop_recv", "wrong_epmap", "wrong_send_ctx")
              if k is None or _applies(c, k)]


@pytest.mark.parametrize("case,kind", FORK_PAIRS, ids=["%s-%s" % p for p in FORK_PAIRS])
def test_a_forked_check_reports_the_same(case, kind, tmp_path, monkeypatch):
    """The pservers of a classic / fleet split read by the parent and a forked child, and the
    trainers' sends checked by another child while the parent checks their recvs and runs
    the other checks (at any pserver count here: the threshold is lowered): the findings and
    warnings, and their order, are one process's, on Paddle's split and on one broken on a pserver or a trainer."""
    from transpile.core import forked
    split_dir = None
    if kind is not None:
        s = Split(case, tmp_path)
        assert mutate(s, kind), kind
        split_dir = s.save()
    reports = []
    forks = []
    real = forked.Forked
    monkeypatch.setattr(forked, "Forked", lambda fn: forks.append(1) or real(fn))
    monkeypatch.setattr(forked, "MIN_FORKED_PSERVERS", 2)
    for workers in ("1", "2"):
        monkeypatch.setenv("PSTRANSPILE_WORKERS", workers)
        r = run_check(case, split_dir)
        reports.append(([f.line() for f in r.findings], [w.line() for w in r.warnings]))
    assert forks == [1, 1]          # the pservers shared, half the trainer checks aside
    assert reports[0] == reports[1]
    if kind is not None:
        assert any(MUTATIONS[kind] in line for line in reports[1][0]), reports[1][0]


def test_a_forked_check_refuses_a_pserver_as_one_process(tmp_path, monkeypatch):
    """An unreadable pserver program, whichever process reads it: exit 2 and the same line."""
    from transpile.core import forked
    monkeypatch.setattr(forked, "MIN_FORKED_PSERVERS", 2)
    case = "fleet/ctr_sparse_adam_sync"
    s = Split(case, tmp_path)
    eps = sorted(d for d in os.listdir(s.dir) if d.startswith("pserver_"))
    with open(os.path.join(s.dir, eps[-1], "main.pb"), "wb") as f:
        f.write(b"\x0a\xff\xff")
    outs = []
    for workers in ("1", "2"):
        monkeypatch.setenv("PSTRANSPILE_WORKERS", workers)
        r = CliRunner().invoke(main, ["check", case_path(case, "main.pb"), s.dir, "--startup",
                                      case_path(case, "startup.pb"), "--cluster",
                                      case_path(case, "cluster.yaml")])
        outs.append((r.exit_code, r.output))
    assert outs[0] == outs[1] and outs[0][0] == 2 and eps[-1] in outs[0][1], outs


def test_the_trainer_checks_in_two_halves_find_what_they_find_in_one(tmp_path):
    """trainer_half 0 (ops, edges, sends) and 1 (recvs, barriers), run apart and joined, are
    check_trainers' findings and warnings in its order: on a split of two trainers, each
    broken in a send and a recv, so that each half finds something for each trainer."""
    from transpile.check import joined, trainer_half
    from transpile.check.loading import load_split
    from transpile.check.stream import streamed_context
    from transpile.check.trainer import check_trainers
    from transpile.core.config import load_config
    case = "clip/classic_ctr1_emb_clipvalue_sync"
    s = Split(case, tmp_path)
    for tdir in ("trainer_0", "trainer_1"):
        ops = s.prog(tdir + "/main").global_block.ops
        del ops[next(i for i, op in enumerate(ops) if op.type == "send")]
        del ops[max(i for i, op in enumerate(ops) if op.type == "recv")]   # a dense one
    cfg = load_config(case_path(case, "cluster.yaml"))
    ctx = streamed_context(programio.load(case_path(case, "main.pb")),
                           programio.load(case_path(case, "startup.pb")), cfg,
                           load_split(s.save(), cfg, lazy=True))
    with ctx.collecting() as whole:
        check_trainers(ctx)
    halves = [trainer_half(ctx, h) for h in (0, 1)]
    for half in halves:                 # the split as a whole, then each trainer
        assert len(half) == 3 and all(found for found, _ in half[1:]), half
    lines = [[f.line() for f in got] for got in joined(*halves)]
    assert lines == [[f.line() for f in got] for got in whole]
    assert any("never sends" in x for x in lines[0]) and any("never receives" in x
                                                             for x in lines[0])
