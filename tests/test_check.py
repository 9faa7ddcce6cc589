"""`check`: Paddle's splits check clean, Paddle's documented bugs are found, broken splits are
caught (each mutation names its problem), and the CLI's exit codes and formats."""
import json
import os
import shutil
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from transpile import check as check_mod
from transpile.core.config import load_config
from transpile.format import programio

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
OPT_OPS = {"sgd", "momentum", "adam", "adagrad", "decayed_adagrad", "rmsprop", "ftrl", "adamax",
           "lamb", "lars_momentum", "adadelta"}


def cases(family=None):
    out = []
    for fam in ([family] if family else ["classic", "fleet", "paddlerec-classic",
                                         "paddlerec-fleet"]):
        root = os.path.join(CORPUS, fam)
        for c in sorted(os.listdir(root)):
            if os.path.isdir(os.path.join(root, c, "expected", "trainer_0")):
                out.append("%s/%s" % (fam, c))
    return out


def case_path(case, *parts):
    return os.path.join(CORPUS, case, *parts)


def corrections(case):
    p = case_path(case, "corrections.json")
    if not os.path.exists(p):
        return []
    with open(p) as f:
        return json.load(f)


def run_check(case, split_dir=None, expect=None):
    main = programio.load(case_path(case, "main.pb"))
    startup = programio.load(case_path(case, "startup.pb"))
    cfg = load_config(case_path(case, "cluster.yaml"))
    return check_mod.check_dir(main, startup, cfg, split_dir or case_path(case, "expected"),
                               expect)


# ---------------------------------------------------------------------------------------------
# a split copied to a temp dir, changed through the model, written back

class Split:
    def __init__(self, case, tmp_path):
        self.dir = str(tmp_path / "split")
        src = case_path(case, "expected")
        shutil.copytree(src, self.dir, ignore=lambda d, names: [
            n for n in names if n.endswith(".json") and n != "runtime.json"])
        self.cache = {}

    def pservers(self):
        return sorted(d for d in os.listdir(self.dir) if d.startswith("pserver_"))

    def prog(self, rel):
        if rel not in self.cache:
            self.cache[rel] = programio.load(os.path.join(self.dir, rel + ".pb"))
        return self.cache[rel]

    def runtime(self, tdir="trainer_0"):
        if tdir not in self.cache:
            with open(os.path.join(self.dir, tdir, "runtime.json")) as f:
                self.cache[tdir] = ("runtime", json.load(f))
        return self.cache[tdir][1]

    def save(self):
        for rel, p in self.cache.items():
            if isinstance(p, tuple):
                with open(os.path.join(self.dir, rel, "runtime.json"), "w") as f:
                    json.dump(p[1], f)
            else:
                programio.save(p, os.path.join(self.dir, rel + ".pb"))
        return self.dir


def _listen(prog):
    op = prog.global_block.ops[0]
    return op if op.type == "listen_and_serv" else None


def mutate(s: Split, kind: str) -> bool:
    """Break the split one way (the kinds of the team's mutate tool, done on our model)."""
    tr = s.prog("trainer_0/main") if kind in ("drop_send", "drop_recv", "wrong_epmap",
                                              "keep_opt_op") else None
    ps = s.pservers()[0]
    if kind in ("drop_send", "drop_recv"):
        ops = tr.global_block.ops
        for i, op in enumerate(ops):
            if op.type == kind.split("_")[1]:
                del ops[i]
                return True
        return False
    if kind == "wrong_epmap":
        ops = tr.global_block.ops
        eps = sorted({e for op in ops for e in (op.attr("epmap") or [])})
        if len(eps) < 2:
            return False
        for op in ops:
            if op.type in ("send", "recv") and op.attr("epmap"):
                rot = {e: eps[(eps.index(e) + 1) % len(eps)] for e in eps}
                op.set_attr("epmap", [rot[e] for e in op.attr("epmap")])
                return True
        return False
    if kind == "wrong_send_ctx":         # fleet: the communicator's endpoints rotated
        rt = s.runtime()
        eps = rt["kwargs"].get("pserver_endpoints") or ["127.0.0.1:6174", "127.0.0.1:6175"]
        for c in rt["send_ctx"].values():
            if not c["is_tensor_table"] and not c["is_sparse"]:
                c["split_endpoints"] = [eps[(eps.index(e) + 1) % len(eps)]
                                        for e in c["split_endpoints"]]
                return True
        return False
    if kind == "keep_opt_op":           # the trainer keeps an optimizer op of the original
        orig = programio.load(os.path.join(os.path.dirname(s.dir), "orig_main.pb"))
        op = next(o for o in orig.global_block.ops if o.type in OPT_OPS)
        tr.global_block.ops.append(op)
        return True
    main = s.prog(ps + "/main")
    las = _listen(main)
    if kind == "shrink_block":
        for v in main.global_block.vars.values():
            if ".block" in v.name and "@GRAD" not in v.name and v.kind == "LOD_TENSOR" \
                    and v.shape and v.shape[0] > 1:
                name = v.name
                main.global_block.vars[name] = v.with_shape((v.shape[0] - 1,) + v.shape[1:])
                st = s.prog(ps + "/startup")
                sv = st.global_block.vars.get(name)
                if sv is not None:
                    st.global_block.vars[name] = sv.with_shape((sv.shape[0] - 1,) +
                                                               sv.shape[1:])
                return True
        return False
    if kind == "fanin":
        las.set_attr("Fanin", las.attr("Fanin") + 1)
        return True
    if kind == "dup_block":
        blocks = las.attr("optimize_blocks")
        las.set_attr("optimize_blocks", list(blocks) + [blocks[0]])
        return True
    if kind == "drop_opt_op":
        for b in main.blocks[1:]:
            for i, op in enumerate(b.ops):
                if op.type in OPT_OPS:
                    del b.ops[i]
                    return True
        return False
    if kind == "drop_scale":
        for b in main.blocks[1:]:
            for i, op in enumerate(b.ops):
                if op.type == "scale" and i > 0 and b.ops[i - 1].type == "sum":
                    del b.ops[i]
                    return True
        return False
    if kind == "drop_init":             # the pserver startup forgets a parameter block
        st = s.prog(ps + "/startup")
        params = {o.input("Param")[0] for b in main.blocks[1:] for o in b.ops
                  if o.type in OPT_OPS}
        for i, op in enumerate(st.global_block.ops):
            if set(op.output_names()) & params:
                del st.global_block.ops[i]
                return True
        return False
    if kind == "undeclared_var":
        for b in main.blocks[1:]:
            for op in b.ops:
                if op.type in OPT_OPS:
                    name = op.input("LearningRate")[0]
                    main.global_block.vars.pop(name, None)
                    return True
        return False
    raise AssertionError(kind)


# what each mutation must be reported as (a phrase of the finding's message)
MUTATIONS = {
    "drop_send": "never sends",
    "drop_recv": "never receives",
    "shrink_block": "cover",
    "drop_opt_op": "has no optimizer op",
    "fanin": "Fanin is",
    "wrong_epmap": "but 127.0.0.1:",
    "wrong_send_ctx": "but 127.0.0.1:",
    "drop_scale": "is not averaged",
    "dup_block": "lists block",
    "keep_opt_op": "keeps optimizer op",
    "undeclared_var": "not declared",
    "drop_init": "nothing initialises",
}


def _applies(case, kind):
    fleet = case.startswith(("fleet/", "paddlerec-fleet/"))
    geo = "geo" in case
    if kind in ("wrong_epmap", "drop_recv") and fleet:
        return False            # fleet trainers have no epmap / recv ops: the communicator does
    if kind == "wrong_send_ctx" and not fleet:
        return False
    if kind == "keep_opt_op" and geo:
        return False
    if kind in ("drop_opt_op", "drop_init") and geo:
        return False
    return True


PAIRS = [(c, k) for c in cases() for k in MUTATIONS if _applies(c, k)]


@pytest.mark.parametrize("case,kind", PAIRS, ids=["%s-%s" % p for p in PAIRS])
def test_mutation_is_caught(case, kind, tmp_path):
    shutil.copy(case_path(case, "main.pb"), tmp_path / "orig_main.pb")
    s = Split(case, tmp_path)
    if not mutate(s, kind):
        pytest.skip("%s does not apply to %s" % (kind, case))
    before = {f.line() for f in run_check(case).findings}
    report = run_check(case, s.save())
    new = [f for f in report.findings if f.line() not in before]
    assert new, "%s on %s: check found nothing new" % (kind, case)
    assert any(MUTATIONS[kind] in f.message for f in new), \
        "%s on %s: no finding mentions %r:\n%s" % (kind, case, MUTATIONS[kind],
                                                   "\n".join(f.line() for f in new))


def test_mutations_apply_widely():
    """Guard against a mutation table that silently skips: every kind applies somewhere."""
    import tempfile
    applied = set()
    for case, kind in PAIRS:
        if kind in applied or kind == "keep_opt_op":
            continue
        with tempfile.TemporaryDirectory() as d:
            from pathlib import Path
            if mutate(Split(case, Path(d)), kind):
                applied.add(kind)
    assert applied == set(MUTATIONS) - {"keep_opt_op"}


# ---------------------------------------------------------------------------------------------
# Paddle's own splits

CLEAN = [c for c in cases() if not corrections(c)]
BUGGY = [c for c in cases() if corrections(c)]


@pytest.mark.parametrize("case", CLEAN)
def test_paddle_split_checks_clean(case):
    report = run_check(case)
    assert report.ok, "\n".join(f.line() for f in report.findings)


@pytest.mark.parametrize("case", BUGGY)
def test_paddle_bugs_in_corrections_are_reported(case):
    report = run_check(case)
    assert not report.ok
    for c in corrections(case):
        prog = c["program"]
        block = c["path"][0]
        hits = [f for f in report.findings if f.program == prog and f.block == block]
        if c["path"][1] == "vars":
            hits = [f for f in hits if c["path"][2] in f.message]
        elif c["path"][1] == "ops" and c["path"][3] == "inputs":
            # the op reads the wrong var: the chain that computes the right one is dead
            hits = [f for f in hits if " ".join(c["value"]) in f.message]
        else:
            hits = [f for f in hits if f.op == c["path"][2]]
        assert hits, "no finding for correction %s %s" % (prog, c["path"])
    # the findings name the shape Paddle got wrong, with what it should be
    text = "\n".join(f.line() for f in report.findings)
    for c in corrections(case):
        if c["path"][-1] == "shape":
            assert "[%s]" % ", ".join(map(str, c["value"])) in text


def _apply_correction(s: Split, c):
    prog = s.prog(c["program"])
    b = prog.blocks[c["path"][0]]
    kind = c["path"][1]
    if kind == "vars":
        name = c["path"][2]
        b.vars[name] = b.vars[name].with_shape(c["value"])
    elif c["path"][3] == "inputs":
        b.ops[c["path"][2]].inputs[c["path"][4]] = list(c["value"])
    else:
        b.ops[c["path"][2]].set_attr(c["path"][4], list(c["value"]))


@pytest.mark.parametrize("case", BUGGY)
def test_corrected_split_checks_clean(case, tmp_path):
    s = Split(case, tmp_path)
    for c in corrections(case):
        _apply_correction(s, c)
    report = run_check(case, s.save())
    assert report.ok, "\n".join(f.line() for f in report.findings)


def test_unreachable_lr_blocks_are_warnings_not_findings():
    report = run_check("classic/lr_decay_conditional")
    assert report.ok
    warned = {(w.program, w.block) for w in report.warnings}
    assert {("trainer_0/main", 1), ("trainer_0/main", 2), ("trainer_0/main", 3)} <= warned


@pytest.mark.parametrize("case", ["classic/l2decay", "fleet/ctr_sparse_adam_sync"])
def test_check_reads_attrs_one_by_one(case):
    """The checks read the attrs they need one by one (Op.attr, find_attr, has_attr): no op of
    the split gets all of its attrs decoded (Op.attrs), which on a big split costs more than
    the checks themselves."""
    cfg = load_config(case_path(case, "cluster.yaml"))
    split = check_mod.load_split(case_path(case, "expected"), cfg)
    check_mod.check_split(programio.load(case_path(case, "main.pb")),
                          programio.load(case_path(case, "startup.pb")), cfg, split)
    progs = [e[k].prog for e in list(split.trainers.values()) + list(split.pservers.values())
             for k in ("main", "startup") if e.get(k) is not None]
    decoded = [(bi, j, op.type) for p in progs for bi, j, op in p.ops()
               if op.source is not None and op.attrs_decoded]
    assert not decoded


def test_missing_pserver_and_wrong_trainer_count(tmp_path):
    case = "classic/basic"
    s = Split(case, tmp_path)
    shutil.rmtree(os.path.join(s.dir, "pserver_127.0.0.1_6175"))
    report = run_check(case, s.dir)
    text = "\n".join(f.line() for f in report.findings)
    assert "no program for pserver 127.0.0.1:6175" in text
    assert "no pserver optimizes fc_w.block0" in text


def test_dangling_block_attr_is_a_finding(tmp_path):
    case = "classic/basic"
    s = Split(case, tmp_path)
    las = _listen(s.prog("pserver_127.0.0.1_6174/main"))
    las.set_attr("optimize_blocks", [1, 2, 7])
    report = run_check(case, s.save())
    assert any("block 7, which does not exist" in f.message for f in report.findings)


def test_expect_golden_same_and_different(tmp_path):
    case = "classic/basic"
    assert run_check(case, expect=case_path(case, "expected")).ok
    s = Split(case, tmp_path)
    mutate(s, "fanin")
    report = run_check(case, s.save(), expect=case_path(case, "expected"))
    golden = [f for f in report.findings if f.check == "golden"]
    assert golden and "attr Fanin: 2 -> 3" in golden[0].message
    assert golden[0].program == "pserver_127.0.0.1_6174/main" and golden[0].op == 0


# ---------------------------------------------------------------------------------------------
# CLI

# the real command line, as a user runs it
from cli import main as _root  # noqa: E402


def cli(*args):
    return CliRunner().invoke(_root, list(args))


def _args(case, split=None):
    return ["check", case_path(case, "main.pb"), "--startup", case_path(case, "startup.pb"),
            "--cluster", case_path(case, "cluster.yaml"), split or case_path(case, "expected")]


def test_cli_clean_exit_0_and_findings_exit_1():
    r = cli(*_args("fleet/mlp_sgd_sync"))
    assert r.exit_code == 0, r.output
    assert "ok" in r.output
    r = cli(*_args("classic/rmsprop"))
    assert r.exit_code == 1
    line = [x for x in r.output.splitlines() if "fc_w_mean_grad_0" in x][0]
    assert line.startswith("pserver_127.0.0.1_6174/main block 0: accumulator")
    assert "(expected: [500, 1000]" in line


def test_cli_bad_input_exit_2(tmp_path):
    r = cli(*_args("classic/basic", str(tmp_path / "nope")))
    assert r.exit_code == 2
    (tmp_path / "empty").mkdir()
    r = cli(*_args("classic/basic", str(tmp_path / "empty")))
    assert r.exit_code == 2 and "not a split folder" in r.output
    bad = tmp_path / "bad"
    shutil.copytree(case_path("classic/basic", "expected"), bad)
    (bad / "trainer_0" / "main.pb").write_bytes(b"\xff\xff\xff garbage")
    r = cli(*_args("classic/basic", str(bad)))
    assert r.exit_code == 2


def test_cli_json_and_junit():
    r = cli(*(_args("classic/l2decay") + ["--format", "json"]))
    assert r.exit_code == 1
    d = json.loads(r.output)
    assert not d["ok"] and d["findings"][0]["program"].startswith("pserver_")
    assert {"program", "block", "op", "message", "expected"} <= set(d["findings"][0])
    r = cli(*(_args("classic/l2decay") + ["--format", "junit"]))
    assert r.exit_code == 1
    suite = ET.fromstring(r.output)
    failures = suite.findall("./testcase/failure")
    assert len(failures) == int(suite.get("failures")) == 2
    assert "clip_0.tmp_0" in failures[0].text
    r = cli(*(_args("classic/basic") + ["--format", "junit"]))
    assert r.exit_code == 0
    assert ET.fromstring(r.output).get("failures") == "0"


def test_cli_expect(tmp_path):
    args = _args("classic/basic") + ["--expect", case_path("classic/basic", "expected")]
    assert cli(*args).exit_code == 0
    s = Split("classic/basic", tmp_path)
    mutate(s, "drop_scale")
    r = cli(*(_args("classic/basic", s.save()) + ["--expect",
                                                  case_path("classic/basic", "expected")]))
    assert r.exit_code == 1
    assert "missing op scale" in r.output


# ---------------------------------------------------------------------------------------------
# what the real models showed

def test_classic_async_lr_decay_counter_to_every_pserver_is_right(tmp_path):
    """Classic async with LR decay sends the trainer's step counter to every pserver (one var,
    every endpoint): each runs the LR-decay block that sums the counters. Not a finding."""
    from cli import main as cli_main
    case = "classic/lr_decay"
    with open(case_path(case, "cluster.yaml")) as f:
        text = f.read()
    (tmp_path / "c.yaml").write_text(text + "\nmode: async\n")
    out = str(tmp_path / "split")
    r = CliRunner().invoke(cli_main, ["-q", "split", case_path(case, "main.pb"), "--startup",
                                      case_path(case, "startup.pb"), "--cluster",
                                      str(tmp_path / "c.yaml"), "--out", out])
    assert r.exit_code == 0, r.output
    main = programio.load(case_path(case, "main.pb"))
    startup = programio.load(case_path(case, "startup.pb"))
    cfg = load_config(str(tmp_path / "c.yaml"))
    tmain = programio.load(os.path.join(out, "trainer_0", "main.pb"))
    assert any(op.type == "send" and len(op.input("X")) == 1 and op.attr("merge_add") is True
               and len(op.attr("epmap") or []) == len(cfg.pservers)
               for op in tmain.global_block.ops), "no counter send to every pserver"
    report = check_mod.check_dir(main, startup, cfg, out)
    assert report.ok, "\n".join(f.line() for f in report.findings)
    # and a pserver that no longer reads the counters is a finding
    ps = sorted(d for d in os.listdir(out) if d.startswith("pserver_"))[0]
    pmain = programio.load(os.path.join(out, ps, "main.pb"))
    for b in pmain.blocks[1:]:
        b.ops = [op for op in b.ops if not any(".trainer_" in n for n in op.input_names())]
    programio.save(pmain, os.path.join(out, ps, "main.pb"))
    report = check_mod.check_dir(main, startup, cfg, out)
    assert any("step counter" in f.message for f in report.findings), \
        "\n".join(f.line() for f in report.findings)


@pytest.mark.parametrize("case,op_type,phrase", [
    ("paddlerec-fleet/fm_async", "distributed_push_sparse", "never sends the sparse grad"),
    ("paddlerec-fleet/fm_geo", "send", "never sends the"),
    ("paddlerec-fleet/fm_async", "send", "never sends"),
])
def test_each_dropped_sparse_send_is_caught(case, op_type, phrase, tmp_path):
    """Dropping any one push or send of a table (not only the first send) is a finding."""
    s0 = Split(case, tmp_path / "probe")
    n = sum(1 for op in s0.prog("trainer_0/main").global_block.ops if op.type == op_type)
    assert n >= 1
    for k in range(n):
        s = Split(case, tmp_path / str(k))
        ops = s.prog("trainer_0/main").global_block.ops
        idx = [i for i, op in enumerate(ops) if op.type == op_type][k]
        dropped = ops.pop(idx)
        report = run_check(case, s.save())
        assert any(phrase in f.message for f in report.findings), \
            "dropping %s %s: %s" % (op_type, dropped.inputs,
                                    "\n".join(f.line() for f in report.findings))
