"""A streamed check (check/stream.py) checks what every send meets at its pserver while that
pserver's programs are read (transfer.target_of), and keeps of the pserver's summary only what
the recv checks ask (pssummary.for_recvs: the persistable names among the trainers' recvs).
Its findings must be those of a check of the split read whole (where the trainer checks read
every summary whole, made on demand): each split here is broken where they read one."""
import os
import shutil

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from transpile import check as check_mod
from transpile.check.context import CheckContext
from transpile.check.stream import streamed_context
from transpile.core.config import load_config
from transpile.format import programio
from transpile.check.trainer import streamed_edges
from transpile.ir.program import Op

from test_check import Split, case_path


def _grad_blocks(prog):
    """{grad: block} of the pserver program's listen_and_serv."""
    las = prog.global_block.ops[0]
    assert las.type == "listen_and_serv"
    return {k: int(b) for k, b in (e.rsplit(":", 1) for e in las.attr("grad_to_block_id"))}


def _never_reads(s: Split):
    """sync: a block's sum no longer reads what trainer 0 sends it."""
    ps = s.prog(s.pservers()[0] + "/main")
    for g, bi in _grad_blocks(ps).items():
        for op in ps.blocks[bi].ops:
            x = op.inputs.get("X", [])
            if op.type == "sum" and g + ".trainer_0" in x:
                x[x.index(g + ".trainer_0")] = g + ".trainer_9"
                return True
    return False


def _overwrites(s: Split):
    """async: a block writes its grad before its optimizer reads it."""
    ps = s.prog(s.pservers()[0] + "/main")
    g, bi = sorted(_grad_blocks(ps).items())[0]
    ps.blocks[bi].ops.insert(0, Op("assign", {"X": ["some_other_var"]}, {"Out": [g]}))
    return True


def _counter_unread(s: Split):
    """async with LR decay: no LR-decay block of the first pserver reads the trainers' step
    counter any more (the other's still do)."""
    done = False
    ps = s.prog(s.pservers()[0] + "/main")
    for b in ps.blocks[1:]:
        for op in b.ops:
            for args in op.inputs.values():
                for i, n in enumerate(args):
                    if "LR_DECAY_COUNTER" in n:
                        args[i] = n + "_gone"
                        done = True
    return done and len(s.pservers()) > 1


def _recv_unknown(s: Split):
    """A recv of a name no pserver block holds (a finding), and one of a persistable var of
    the pserver that is no parameter block's (none)."""
    ps_dir = s.pservers()[0]
    ep = ps_dir[len("pserver_"):].replace("_", ":")
    ps = s.prog(ps_dir + "/main")
    held = {op.input("Param")[0] for b in ps.blocks[1:] for op in b.ops if op.input("Param")}
    other = next(v.name for v in ps.global_block.vars.values()
                 if v.persistable and v.name not in held and "learning_rate" in v.name)
    if os.path.exists(os.path.join(s.dir, "trainer_0", "runtime.json")):     # fleet
        ctxs = [c for c in s.runtime()["recv_ctx"].values()
                if not c["is_tensor_table"] and ep in c["split_endpoints"]][:2]
        for c, name in zip(ctxs, ("nowhere_held", other)):
            c["split_varnames"][c["split_endpoints"].index(ep)] = name
        return len(ctxs) == 2
    tr = s.prog("trainer_0/main")
    renamed = 0
    for op in tr.global_block.ops:
        if op.type != "recv":
            continue
        out, eps = op.outputs["Out"], list(op.attr("epmap"))
        for i, e in enumerate(eps):
            if e == ep and renamed < 2:
                out[i] = ("nowhere_held", other)[renamed]
                renamed += 1
    return renamed == 2


CASES = [
    ("classic/basic", None, _never_reads, "never reads"),
    ("classic/async_mlp_adam", None, _overwrites, "before using it"),
    ("classic/lr_decay", "async", _counter_unread, "where no block reads it"),
    ("classic/basic", None, _recv_unknown, "which has no such parameter block"),
    ("fleet/mlp_adam_sync", None, _recv_unknown, "which has no such parameter block"),
]


def _our_split(case, mode, tmp_path):
    """The case split by pstranspile in `mode` (its cluster.yaml with the mode changed): the
    split folder and the cluster file."""
    cluster = tmp_path / "cluster.yaml"
    with open(case_path(case, "cluster.yaml")) as f:
        text = f.read()
    cluster.write_text(text + "\nmode: %s\n" % mode)
    out = str(tmp_path / "ours")
    r = CliRunner().invoke(cli_main, [
        "split", "--quiet", case_path(case, "main.pb"), "--startup",
        case_path(case, "startup.pb"), "--cluster", str(cluster), "--out", out])
    assert r.exit_code == 0, r.output
    return out, str(cluster)


@pytest.mark.parametrize("case,mode,breaks,phrase", CASES,
                         ids=["%s-%s" % (c[2].__name__, c[0]) for c in CASES])
def test_a_streamed_check_finds_what_a_whole_check_finds(case, mode, breaks, phrase, tmp_path):
    cluster = case_path(case, "cluster.yaml")
    s = Split(case, tmp_path)
    if mode is not None:
        ours, cluster = _our_split(case, mode, tmp_path)
        shutil.rmtree(s.dir)
        shutil.copytree(ours, s.dir)
    assert breaks(s)
    split_dir = s.save()
    main = programio.load(case_path(case, "main.pb"))
    startup = programio.load(case_path(case, "startup.pb"))
    cfg = load_config(cluster)
    whole = check_mod.check_split(main, startup, cfg, check_mod.load_split(split_dir, cfg))
    streamed = check_mod.check_dir(main, startup, cfg, split_dir)
    lines = [[f.line() for f in r.findings] + ["w " + w.line() for w in r.warnings]
             for r in (whole, streamed)]
    assert lines[0] == lines[1]
    assert any(phrase in line for line in lines[1]), lines[1]


def test_a_streamed_check_keeps_of_each_pserver_what_the_recvs_ask():
    """A streamed context: every send's target checked with its pserver (targets_read), and
    of each pserver's summary only the persistable names the trainers receive that none of
    its parameter blocks holds (the recv checks ask only about those; else the comparisons
    above are not of what a streamed check keeps)."""
    case = "classic/basic"
    cfg = load_config(case_path(case, "cluster.yaml"))
    main = programio.load(case_path(case, "main.pb"))
    split = check_mod.load_split(case_path(case, "expected"), cfg, lazy=True)
    ctx = streamed_context(main, None, cfg, split)
    whole = CheckContext(main, None, cfg, check_mod.load_split(case_path(case, "expected"),
                                                                cfg))
    assert ctx.targets_read and not whole.targets_read
    recvs = streamed_edges(whole)[1]
    assert recvs
    for ep in cfg.pservers:
        kept, full = ctx.pserver_summary(ep), whole.pserver_summary(ep)
        held = {pb.param for pb in whole.param_blocks[ep] if pb.param}
        assert held and held & full.persistable & recvs
        assert kept.persistable == (full.persistable & recvs) - held != full.persistable
        assert not kept.blocks and full.blocks and not kept.later_inputs
    # what is kept of a pserver's listen_and_serv: where it is, not the op (and its bytes)
    assert ctx.index.listen and all(op is None for _, op in ctx.index.listen.values())


def test_the_programs_a_check_reads_keep_no_var_bytes(monkeypatch):
    """What a check holds at once (the original, the trainers' programs, every pserver's read
    in turn) keeps no var's bytes: nothing of it is written (protoread.decode's
    read_only)."""
    from transpile.check import stream
    case = "classic/basic"
    cfg = load_config(case_path(case, "cluster.yaml"))
    split = check_mod.load_split(case_path(case, "expected"), cfg, lazy=True)
    progs = [t[k].prog for t in split.trainers.values() for k in ("main", "startup")]
    read = stream.load_pserver

    def load(split, entry, config):
        read(split, entry, config)
        progs.extend(entry[k].prog for k in ("main", "startup"))
    monkeypatch.setattr(stream, "load_pserver", load)
    main = programio.load(case_path(case, "main.pb"))
    streamed_context(main, None, cfg, split)
    seen = []
    check_dir = check_mod.check_dir
    monkeypatch.setattr(check_mod, "check_dir", lambda main, start, *a, **k: seen.extend(
        (main, start)) or check_dir(main, start, *a, **k))
    r = CliRunner().invoke(cli_main, ["check", case_path(case, "main.pb"), "--startup",
                                      case_path(case, "startup.pb"), "--cluster",
                                      case_path(case, "cluster.yaml"),
                                      case_path(case, "expected")])
    assert r.exit_code == 0, r.output
    assert len(seen) == 2 and len(progs) == 2 + 4 * len(cfg.pservers)     # streamed twice
    progs += seen
    assert all(v.source is None for p in progs for b in p.blocks for v in b.vars.values())
