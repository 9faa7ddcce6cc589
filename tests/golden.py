"""Structural comparison of a split with a reference case (Paddle's output in tests/corpus).

The same rules as the team's corpus checker:
  - programs compared in a canonical form: empty slots dropped, slots sorted, debug attrs
    (op_callstack, op_namescope, op_device, with_quant_attr) dropped, BLOCK(S) attrs as indices,
    floats to 6 significant digits, `__control_var@<anything>` renamed by first appearance;
  - corrections.json entries are applied to the expected program first;
  - an expected attr the actual op lacks is fine when it equals the op's registered default
    (tests/op_defaults.json);
  - set-ordered lists (listen_and_serv grad_to_block_id, runs of fake_init ops) are sorted;
  - runtime.json compared as JSON values, the geo communicator's `sparse_attrs` (entries joined
    with '#' from a Python set of table names in Paddle) as a set of entries;
  - the ps style's descriptors (worker_desc.txt, server_desc.txt) compared byte for byte
    (ours are byte-identical to Paddle's; a difference is shown as a unified diff);
  - a case with expected/error.txt passes iff the split exited 2 and wrote no program files.
"""
from __future__ import annotations

import copy
import difflib
import json
import os
import re

from transpile.format import programio, proto

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
DROP_ATTRS = {"op_callstack", "op_namescope", "op_device", "with_quant_attr"}
_CV = re.compile(r"__control_var@[0-9A-Za-z.e+_-]+")


def split_args(case: str, out: str) -> list[str]:
    """The `pstranspile split` arguments for a corpus case, writing to `out`."""
    return ["split", os.path.join(case, "main.pb"), "--startup", os.path.join(case, "startup.pb"),
            "--cluster", os.path.join(case, "cluster.yaml"), "--out", out]


def load_case(family: str, name: str):
    """(main, startup, config) of a corpus case."""
    from transpile import load_config
    case = os.path.join(CORPUS, family, name)
    return (programio.load(os.path.join(case, "main.pb")),
            programio.load(os.path.join(case, "startup.pb")),
            load_config(os.path.join(case, "cluster.yaml")))


def tree_files(folder: str) -> dict:
    """{path relative to `folder`: bytes} of every file under it (two splits compare equal
    exactly when they wrote the same files with the same bytes)."""
    files = {}
    for dirpath, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(dirpath, n)
            with open(p, "rb") as f:
                files[os.path.relpath(p, folder)] = f.read()
    return files


def case_dirs(family: str) -> list[str]:
    root = os.path.join(CORPUS, family)
    return sorted(os.path.join(root, d) for d in os.listdir(root)
                  if os.path.isfile(os.path.join(root, d, "main.pb")))


def _f(x):
    return float("%.6g" % x)


def _attr(a):
    t, v = a.type, a.value
    if t in ("FLOAT", "FLOAT64"):
        return _f(v)
    if t in ("FLOATS", "FLOAT64S"):
        return [_f(x) for x in v]
    if t == "BLOCK":
        return {"block": v}
    if t == "BLOCKS":
        return {"blocks": list(v)}
    if t == "VAR":
        return {"var": v}
    if t == "VARS":
        return {"vars": list(v)}
    if t in ("SCALAR", "SCALARS"):
        return {"type": t}
    return list(v) if isinstance(v, (list, tuple)) else v


def canonical(prog) -> dict:
    names: dict = {}

    def cv(s):
        return _CV.sub(lambda m: names.setdefault(m.group(0), "@CV%d" % len(names)), s)

    blocks = []
    for b in prog.blocks:
        ops = []
        for op in b.ops:
            ins = {k: [cv(a) for a in v] for k, v in op.inputs.items() if v}
            outs = {k: [cv(a) for a in v] for k, v in op.outputs.items() if v}
            attrs = {}
            for name, a in op.attrs.items():
                if name in DROP_ATTRS:
                    continue
                v = _attr(a)
                if isinstance(v, str):
                    v = cv(v)
                elif isinstance(v, list) and v and isinstance(v[0], str):
                    v = [cv(x) for x in v]
                attrs[name] = v
            ops.append({"type": op.type, "inputs": dict(sorted(ins.items())),
                        "outputs": dict(sorted(outs.items())),
                        "attrs": dict(sorted(attrs.items()))})
        vars_ = {}
        for v in b.vars.values():
            d = {"type": v.kind, "persistable": bool(v.persistable)}
            slot = {"LOD_TENSOR": "lod_tensor", "SELECTED_ROWS": "selected_rows",
                    "LOD_TENSOR_ARRAY": "tensor_array"}
            desc = None
            for s in ("lod_tensor", "selected_rows", "tensor_array"):
                if s in v.type.descs:
                    desc = (s, v.type.descs[s])
                    break
            del slot
            if desc is not None:
                s, (t, lod) = desc
                if s != "selected_rows":
                    d["lod_level"] = lod or 0
                d["dtype"] = t.dtype
                d["shape"] = list(t.dims)
            vars_[cv(v.name)] = d
        blocks.append({"idx": b.idx, "parent_idx": b.parent_idx,
                       "vars": dict(sorted(vars_.items())), "ops": ops})
    return {"blocks": blocks}


def _normalise(prog):
    for b in prog["blocks"]:
        for op in b["ops"]:
            if op["type"] == "listen_and_serv" and isinstance(
                    op["attrs"].get("grad_to_block_id"), list):
                op["attrs"]["grad_to_block_id"] = sorted(op["attrs"]["grad_to_block_id"])
        ops, i = b["ops"], 0
        while i < len(ops):
            j = i
            while j < len(ops) and ops[j]["type"] == "fake_init":
                j += 1
            if j - i > 1:
                ops[i:j] = sorted(ops[i:j], key=lambda o: o["outputs"].get("Out", [""]))
            i = max(j, i + 1)
    return prog


_DEFAULTS = None


def _defaults():
    global _DEFAULTS
    if _DEFAULTS is None:
        with open(os.path.join(HERE, "op_defaults.json")) as f:
            _DEFAULTS = json.load(f)["defaults"]
    return _DEFAULTS


def _same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return _f(a) == _f(b)
    return a == b


def _drop_defaults(exp, act):
    d_all = _defaults()
    for be, ba in zip(exp["blocks"], act["blocks"]):
        if [o["type"] for o in be["ops"]] != [o["type"] for o in ba["ops"]]:
            continue
        for oe, oa in zip(be["ops"], ba["ops"]):
            d = d_all.get(oe["type"], {})
            for name in [n for n in oe["attrs"] if n not in oa["attrs"]]:
                if name in d and _same(oe["attrs"][name], d[name]):
                    del oe["attrs"][name]


def compare_programs(exp: dict, act: dict) -> list[str]:
    diffs = []
    if len(exp["blocks"]) != len(act["blocks"]):
        diffs.append("block count: expected %d, got %d" % (len(exp["blocks"]), len(act["blocks"])))
    for be, ba in zip(exp["blocks"], act["blocks"]):
        i = be["idx"]
        if be["parent_idx"] != ba["parent_idx"]:
            diffs.append("block %d parent: expected %d, got %d"
                         % (i, be["parent_idx"], ba["parent_idx"]))
        te = [o["type"] for o in be["ops"]]
        ta = [o["type"] for o in ba["ops"]]
        if te != ta:
            diffs.append("block %d op types:\n  expected %s\n  got      %s" % (i, te, ta))
        else:
            for k, (oe, oa) in enumerate(zip(be["ops"], ba["ops"])):
                for key in ("inputs", "outputs"):
                    if oe[key] != oa[key]:
                        diffs.append("block %d op %d %s %s: expected %s, got %s"
                                     % (i, k, oe["type"], key, oe[key], oa[key]))
                for an, av in oe["attrs"].items():
                    if an not in oa["attrs"]:
                        diffs.append("block %d op %d %s attr %s missing (expected %r)"
                                     % (i, k, oe["type"], an, av))
                    elif not _same(oa["attrs"][an], av):
                        diffs.append("block %d op %d %s attr %s: expected %r, got %r"
                                     % (i, k, oe["type"], an, av, oa["attrs"][an]))
        ve, va = be["vars"], ba["vars"]
        for n in sorted(set(ve) - set(va)):
            diffs.append("block %d var %s missing" % (i, n))
        for n in sorted(set(va) - set(ve)):
            diffs.append("block %d var %s unexpected" % (i, n))
        for n in sorted(set(ve) & set(va)):
            if ve[n] != va[n]:
                diffs.append("block %d var %s: expected %s, got %s" % (i, n, ve[n], va[n]))
    return diffs


def _corrections(case_dir):
    p = os.path.join(case_dir, "corrections.json")
    if not os.path.isfile(p):
        return {}
    with open(p) as f:
        entries = json.load(f)
    by_prog: dict = {}
    for e in entries:
        by_prog.setdefault(e["program"], []).append(e)
    return by_prog


def _apply(prog, entries):
    for e in entries:
        path = e["path"]
        node = prog["blocks"][path[0]]
        for k in path[1:-1]:
            node = node[k]
        node[path[-1]] = copy.deepcopy(e["value"])


def _json_diffs(e, a, where, out):
    if isinstance(e, dict) and isinstance(a, dict):
        for k in sorted(set(e) | set(a)):
            if k not in a:
                out.append("%s missing" % (where + [k]))
            elif k not in e:
                out.append("%s unexpected" % (where + [k]))
            else:
                _json_diffs(e[k], a[k], where + [k], out)
    elif isinstance(e, list) and isinstance(a, list) and len(e) == len(a):
        for i, (x, y) in enumerate(zip(e, a)):
            _json_diffs(x, y, where + [i], out)
    elif not _same(e, a):
        out.append("%s: expected %s, got %s" % (where, json.dumps(e)[:200], json.dumps(a)[:200]))


def _unorder_sparse_attrs(runtime: dict) -> None:
    kwargs = runtime.get("kwargs")
    if isinstance(kwargs, dict) and isinstance(kwargs.get("sparse_attrs"), str):
        kwargs["sparse_attrs"] = "#".join(sorted(kwargs["sparse_attrs"].split("#")))


def expected_files(case_dir):
    root = os.path.join(case_dir, "expected")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith(".pb") or f == "runtime.json" or f.endswith("_desc.txt"):
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def compare_texts(exp_path: str, act_path: str, context: int = 2) -> list[str]:
    """Byte-for-byte comparison of two text files: [] or the lines of a unified diff."""
    with open(exp_path, "rb") as f:
        exp = f.read()
    with open(act_path, "rb") as f:
        act = f.read()
    if exp == act:
        return []
    lines = list(difflib.unified_diff(exp.decode("utf-8", "replace").splitlines(),
                                      act.decode("utf-8", "replace").splitlines(),
                                      "expected", "ours", n=context, lineterm=""))
    return lines[:60] or ["the bytes differ (line endings or encoding)"]


def is_refused(case_dir) -> bool:
    return os.path.isfile(os.path.join(case_dir, "expected", "error.txt"))


def assert_refused_like_paddle(case_dir: str, out: str, reason: bool = False) -> None:
    """`split` of a case Paddle refuses: exit 2, one line (with Paddle's reason from
    expected/error.txt when `reason`), nothing written at `out`."""
    from click.testing import CliRunner
    from cli import main as cli_main
    r = CliRunner().invoke(cli_main, split_args(case_dir, out))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    if reason:
        with open(os.path.join(case_dir, "expected", "error.txt")) as f:
            assert f.read().strip() in r.output, r.output
    assert not os.path.exists(out)


def compare_case(case_dir: str, out_dir: str, exit_code: int | None = None) -> list[str]:
    """Differences between Paddle's output for a case and a split folder (empty = match)."""
    if is_refused(case_dir):
        problems = []
        if exit_code is not None and exit_code != 2:
            problems.append("exit status %s, expected 2 (Paddle refuses this case)" % exit_code)
        if os.path.isdir(out_dir):
            for dirpath, _, files in os.walk(out_dir):
                problems += ["program file written: %s" % os.path.join(dirpath, f)
                             for f in files if f.endswith(".pb")]
        return problems
    diffs = []
    if exit_code not in (None, 0):
        diffs.append("exit status %d, expected 0" % exit_code)
    corrections = _corrections(case_dir)
    for rel in expected_files(case_dir):
        exp_path = os.path.join(case_dir, "expected", rel)
        act_path = os.path.join(out_dir, rel)
        if not os.path.isfile(act_path):
            diffs.append("%s: missing" % rel)
            continue
        if rel.endswith("_desc.txt"):
            diffs += ["%s: %s" % (rel, d) for d in compare_texts(exp_path, act_path)]
        elif rel.endswith(".pb"):
            exp = canonical(programio.load(exp_path))
            act = canonical(programio.load(act_path))
            key = rel[:-3].replace(os.sep, "/")
            if key in corrections:
                _apply(exp, corrections[key])
            _normalise(exp)
            _normalise(act)
            _drop_defaults(exp, act)
            diffs += ["%s: %s" % (rel, d) for d in compare_programs(exp, act)]
        else:
            with open(exp_path) as f:
                e = json.load(f)
            with open(act_path) as f:
                a = json.load(f)
            out: list = []
            _unorder_sparse_attrs(e)
            _unorder_sparse_attrs(a)
            _json_diffs(e, a, [], out)
            diffs += ["%s: %s" % (rel, d) for d in out]
    return diffs


def split_and_compare(case_dir: str, out: str) -> tuple:
    """(CLI output, differences from Paddle's output) of `pstranspile split` of a corpus case
    into `out` (no differences = a match)."""
    from click.testing import CliRunner
    from cli import main as cli_main
    r = CliRunner().invoke(cli_main, ["-q"] + split_args(case_dir, out))
    return r.output, compare_case(case_dir, out, r.exit_code)


def program_message(ops=(), vars_=("x",)):
    """A one-block ProgramDesc message (X -> Out on var x): `ops` is [(type, [(attr name,
    AttrType, field, value)])]."""
    p = proto.ProgramDesc()
    b = p.blocks.add(idx=0, parent_idx=-1)
    for name in vars_:
        v = b.vars.add(name=name, persistable=False)
        v.type.type = proto.VAR_TYPE_NUM["LOD_TENSOR"]
        v.type.lod_tensor.tensor.data_type = proto.VAR_TYPE_NUM["FP32"]
        v.type.lod_tensor.tensor.dims.extend([4, 8])
    for op_type, attrs in ops:
        o = b.ops.add(type=op_type)
        o.inputs.add(parameter="X", arguments=["x"])
        o.outputs.add(parameter="Out", arguments=["x"])
        for name, atype, field, value in attrs:
            a = o.attrs.add(name=name, type=proto.ATTR_TYPE_NUM[atype])
            if isinstance(value, list):
                getattr(a, field).extend(value)
            else:
                setattr(a, field, value)
    return p


# attrs of a scale op as Paddle writes them, for program_message
SCALE_ATTRS = [("op_role", "INT", "i", 0), ("op_callstack", "STRINGS", "strings", ["a", "b"]),
               ("scale", "FLOAT", "f", 2.0)]
