"""`run --local`'s verdict: what each trainer ended with on Paddle's runtime against simulate's
prediction, value by value, and how it is printed (text, json, junit).

A value is equal when its largest difference is within `rtol * max(1, largest predicted
value)` (float32 rounding: the runtime's kernels sum in another order) plus the prediction's
own spread: how far the prediction moves when the trainers compute in float64 (an adaptive
optimizer turns rounding noise into steps of its learning rate). With a dense Adam table the
prediction follows the runtime's bucket orders and pushed gradients (buckets.py), and the
gradients the prediction computed are compared with the runtime's as values of their own
("grad/<table id>"), to `max(rtol, GRAD_RTOL)` times max(1, the largest gradient) plus float64's
rounding of them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..plan.faults import PS_DENSE_EMPTY_INIT
from .buckets import GRAD_RTOL

RTOL = 1e-6
KIND = {"dense": "dense", "sparse": "sparse rows", "local": "geo table rows (its own copy)",
        "grad": "pushed gradients"}


@dataclass
class ValueDiff:
    trainer: str
    key: str                    # "dense/x", "sparse/<table id>", "local/<table id>"
    name: str                   # the parameter
    shape: tuple
    max_abs: float
    tol: float
    detail: str = ""
    moved: Optional[float] = None   # the runtime's largest change from the initial value

    @property
    def ok(self) -> bool:
        return not self.detail and self.max_abs <= self.tol

    @property
    def unmoved(self) -> bool:
        """The runtime left it within its tolerance of where it started: equal or not, the
        comparison cannot tell a value that trained from one that did not."""
        return self.moved is not None and self.moved <= self.tol


@dataclass
class RunVerdict:
    split_dir: str
    mode: str
    trainers: int
    pservers: int
    steps: int
    seconds: float
    diffs: list = field(default_factory=list)
    failures: list = field(default_factory=list)    # "trainer_0 died at step 0 in op sum: ..."
    notes: list = field(default_factory=list)
    prediction_error: Optional[str] = None
    expect_equal: bool = False      # fail when a value did not move (proves nothing)
    accepted: tuple = ()            # parameter names (fnmatch patterns) accepted unmoved

    @property
    def unmoved(self) -> list:
        """"trainer parameter" of each compared value the runtime did not move."""
        return ["%s %s" % (d.trainer, d.name) for d in self.diffs if d.unmoved]

    @property
    def vacuous(self) -> list:
        """The parameters with a value that did not move, not accepted by name, each once."""
        import fnmatch
        return list(dict.fromkeys(
            d.name for d in self.diffs if d.unmoved
            and not any(fnmatch.fnmatchcase(d.name, pat) for pat in self.accepted)))

    @property
    def differing(self) -> list:
        """The parameters that differ, each once, in order."""
        return list(dict.fromkeys(d.name for d in self.diffs if not d.ok))

    @property
    def equal(self) -> bool:
        return not self.failures and self.prediction_error is None and bool(self.diffs) and \
            not self.differing

    @property
    def exit_code(self) -> int:
        if not self.equal:
            return 1
        return 1 if self.expect_equal and self.vacuous else 0


def _name(key, names):
    kind, _, rest = key.partition("/")
    if kind == "grad":
        return "dense table %s" % rest
    return rest if kind == "dense" else names.get(rest, "table " + rest)


def compare(run, split_dir, config, rtol: float = RTOL, expect_equal: bool = False,
            accepted=()) -> RunVerdict:
    """A RunVerdict of a local.LocalRun."""
    pred = run.prediction
    v = RunVerdict(split_dir, config.mode, config.trainers, len(config.pservers),
                   _steps(pred), run.seconds, notes=list(pred.notes) + list(run.notes),
                   prediction_error=pred.error, expect_equal=bool(expect_equal),
                   accepted=tuple(accepted or ()))
    v.failures = failures(run, config)
    for trainer, vals in sorted(pred.values.items()):
        got = run.values.get(trainer)
        for key, want in sorted(vals.items()):
            name = _name(key, pred.names)
            want = np.asarray(want, dtype=np.float64)
            if got is None or key not in got:
                if not v.failures:
                    v.diffs.append(ValueDiff(trainer, key, name, want.shape, float("nan"), 0.0,
                                             "the run has no value of it"))
                continue
            have = np.asarray(got[key], dtype=np.float64)
            if have.size != want.size:
                v.diffs.append(ValueDiff(trainer, key, name, want.shape, float("nan"), 0.0,
                                         "%d values in the run, %d predicted"
                                         % (have.size, want.size)))
                continue
            have = have.reshape(want.shape)
            d = float(np.max(np.abs(have - want))) if want.size else 0.0
            scale = float(np.max(np.abs(want))) if want.size else 0.0
            r = max(rtol, GRAD_RTOL) if key.startswith("grad/") else rtol
            tol = r * max(1.0, scale) + pred.spread.get("%s %s" % (trainer, key), 0.0)
            start = pred.start.get(key)
            moved = None if start is None or np.size(start) != have.size else \
                float(np.max(np.abs(have - np.asarray(start, np.float64).reshape(have.shape)),
                             initial=0.0))
            v.diffs.append(ValueDiff(trainer, key, name, want.shape, d, tol, moved=moved))
    return v


def _steps(pred) -> int:
    return len({k.split(".", 1)[0] for k in pred.feeds})


def failures(run, config) -> list:
    """One line per pserver that ended while the trainers trained, and per trainer that did
    not finish: the step, the op and Paddle's message."""
    out = []
    for i, rc in sorted(run.deaths.items()):
        how = "was killed by signal %d" % -rc if isinstance(rc, int) and rc < 0 else \
            "exited %s" % rc
        served = os.path.isfile(os.path.join(run.work, "pserver%d.json" % i))
        out.append("pserver_%d %s %s%s (log: %s/pserver%d.log)"
                   % (i, how, "while the trainers trained" if served else "at its start",
                      "" if served else _start_fault(run.prediction.empty_inits), run.work, i))
    for t in range(config.trainers):
        tag = "trainer%d" % t
        rc = run.exits.get(tag)
        rep = run.reports.get(tag, {})
        if rc == 0 and rep.get("step") == "done":
            continue
        where = _where(rep.get("step"))
        if rc == "timeout":
            out.append("trainer_%d timed out %s%s (log: %s/%s.log)"
                       % (t, where, _geo_start_hang(run, t), run.work, tag))
        elif isinstance(rc, int) and rc < 0:
            out.append("trainer_%d was killed by signal %d %s (log: %s/%s.log)"
                       % (t, -rc, where, run.work, tag))
        elif rc in (4, "stopped"):
            continue        # stopped because another role failed
        elif rep.get("error"):
            op = " in op %s" % rep["op"] if rep.get("op") else ""
            out.append("trainer_%d died %s%s: %s" % (t, where, op, rep["error"]))
        else:
            out.append("trainer_%d exited %s %s (log: %s/%s.log)" % (t, rc, where, run.work,
                                                                     tag))
    return out


def _start_fault(empty_inits) -> str:
    """Why a pserver cannot start, as the prediction's tables found it: the (table id, slot)
    of each empty initializer (simulate/ps/tables/dense.py), which Paddle's own split of the
    program holds too."""
    found = sorted(set(empty_inits))
    if not found:
        return ""
    return (": %s an empty initializer, which Paddle's MemoryDenseTable::CreateInitializer "
            "cannot read (Paddle's PsDescBuilder writes it for a dense parameter no initializer "
            "op it knows fills, e.g. an assign; Paddle's own split of the program fails so: "
            "Paddle's fault, not the split's: %s, which `paddle_faults: fix` corrects)"
            % (" and ".join("table %s's %s has" % (t, n) for t, n in found),
               PS_DENSE_EMPTY_INIT))


def _geo_start_hang(run, t) -> str:
    """Where a geo trainer that timed out hung: in Paddle's GeoCommunicator::InitParams
    (rolegeo.py marks its start; it passes the "pushed" turn after). With two dense tables or
    more, why: InitParams runs an InitDense per dense table at once in its thread pool, each
    waiting at the pservers' BarrierTable, whose round counts the trainer ids that arrived in
    a set: a trainer's second arrival while its first waits counts once, that round passes
    with it, and the next waits for a trainer that has gone (barrier_table.cc)."""
    sync = os.path.join(run.work, "sync")
    if not os.path.exists(os.path.join(sync, "init_params.%d" % t)) or \
            os.path.exists(os.path.join(sync, "pushed.%d" % t)):
        return ""
    dense = len((run.prediction.geo or {}).get("dense") or [])
    if dense < 2:
        return " in Paddle's GeoCommunicator::InitParams"
    return (" in Paddle's GeoCommunicator::InitParams: its %d dense tables' InitDense run at "
            "once, each waiting at the BarrierTable, which counts a trainer's two arrivals "
            "once; the barrier waits for a trainer that has passed (Paddle's own geo start "
            "runs them so: Paddle's fault, not the split's)" % dense)


def _where(step) -> str:
    if isinstance(step, int):
        return "at step %d" % step
    return "at its start" if step in (None, "start") else "after training"


# --- rendering ----------------------------------------------------------------------------
def render_text(v: RunVerdict, echo) -> None:
    echo("run: %s mode, %d trainer%s, %d pserver%s, %d steps on Paddle 2.6.2's runtime "
         "(127.0.0.1), %.0f s" % (v.mode, v.trainers, "s" if v.trainers != 1 else "", v.pservers,
                                  "s" if v.pservers != 1 else "", v.steps, v.seconds))
    for f in v.failures:
        echo("failed: " + f)
    if v.prediction_error:
        echo("simulate's prediction fails to execute: %s" % v.prediction_error)
    if v.diffs:
        rows = [("trainer", "value", "shape", "max |a-b|", "tol", "")]
        for d in v.diffs:
            rows.append((d.trainer, "%s %s" % (KIND[d.key.split("/")[0]], d.name),
                         str(list(d.shape)), "%.3e" % d.max_abs, "%.1e" % d.tol,
                         _status(d)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "  " + r[5]
                 if r[5] else "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    echo("result: " + summary(v))
    for line in vacuity(v):
        echo(line)


def _status(d) -> str:
    if not d.ok:
        return "DIFFERENT" + (": " + d.detail if d.detail else "")
    return "ok, did not move: proves nothing" if d.unmoved else "ok"


def vacuity(v: RunVerdict) -> list:
    """The lines saying which compared values did not move (and --expect-equal's failure)."""
    if v.failures or v.prediction_error or not v.unmoved:
        return []
    out = ["vacuous: %d of %d values did not move from their initial values (beyond their "
           "tolerance): %s; their equality proves nothing about the split"
           % (len(v.unmoved), len(v.diffs), ", ".join(v.unmoved))]
    if v.expect_equal and v.vacuous:
        out.append("fails --expect-equal: %s did not move (--accept-unchanged NAME accepts "
                   "one)" % ", ".join(v.vacuous))
    return out


def summary(v: RunVerdict) -> str:
    if v.failures:
        kinds = [(sum(1 for f in v.failures if f.startswith(k)), k) for k in ("pserver",
                                                                              "trainer")]
        return "the split does not train on Paddle's runtime (%s failed)" % " and ".join(
            "%d %s%s" % (n, k, "s" if n != 1 else "") for n, k in kinds if n)
    if v.prediction_error:
        return "the runtime trained; simulate's prediction fails, nothing compared"
    if v.differing:
        return "%d of %d parameters differ from simulate's prediction: %s" % (
            len(v.differing), len({d.name for d in v.diffs}), ", ".join(v.differing))
    return "all %d parameters equal to simulate's prediction (%d values, largest difference " \
           "%.1e) after %d steps" % (len({d.name for d in v.diffs}), len(v.diffs),
                                     max((d.max_abs for d in v.diffs), default=0.0), v.steps)


def to_json(v: RunVerdict) -> dict:
    return {"split": v.split_dir, "mode": v.mode, "trainers": v.trainers,
            "pservers": v.pservers, "steps": v.steps, "equal": v.equal,
            "exit_code": v.exit_code, "failures": v.failures,
            "prediction_error": v.prediction_error, "differing": v.differing,
            "unmoved": v.unmoved, "expect_equal": v.expect_equal, "vacuous": v.vacuous,
            "values": [{"trainer": d.trainer, "value": d.key, "parameter": d.name,
                        "shape": list(d.shape), "max_abs": _num(d.max_abs), "tol": d.tol,
                        "moved": d.moved, "ok": d.ok, "unmoved": d.unmoved,
                        "detail": d.detail} for d in v.diffs],
            "notes": v.notes, "summary": summary(v)}


def _num(x):
    return None if x != x else x        # NaN is no JSON


def render_junit(v: RunVerdict) -> str:
    """JUnit XML: a test per trainer's start and per compared value."""
    from xml.sax.saxutils import escape, quoteattr
    cases = []
    for f in v.failures:
        cases.append('  <testcase classname="pstranspile.run" name=%s>\n    <failure '
                     'message=%s type="runtime">%s</failure>\n  </testcase>'
                     % (quoteattr(f.split(" ", 1)[0]), quoteattr(f), escape(f)))
    vacuous = set(v.vacuous) if v.expect_equal else set()
    for d in v.diffs:
        name = quoteattr("%s %s" % (d.trainer, d.key))
        if d.ok and d.unmoved and d.name in vacuous:
            msg = "%s did not move (by %.3e, within %.1e): its equality proves nothing" % (
                d.name, d.moved, d.tol)
            cases.append('  <testcase classname="pstranspile.run" name=%s>\n    <failure '
                         'message=%s type="vacuous">%s</failure>\n  </testcase>'
                         % (name, quoteattr(msg), escape(msg)))
        elif d.ok:
            cases.append('  <testcase classname="pstranspile.run" name=%s/>' % name)
        else:
            msg = "%s: max |a-b| %.3e > %.1e %s" % (d.name, d.max_abs, d.tol, d.detail)
            cases.append('  <testcase classname="pstranspile.run" name=%s>\n    <failure '
                         'message=%s type="different">%s</failure>\n  </testcase>'
                         % (name, quoteattr(msg), escape(msg)))
    failed = len(v.failures) + sum(1 for d in v.diffs if not d.ok or (
        d.unmoved and d.name in vacuous))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuite name=%s tests="%d" failures="%d" errors="0" skipped="0">'
           % (quoteattr("pstranspile run " + v.split_dir), len(cases), failed)]
    out += cases
    if v.notes:
        out.append("  <system-out>%s</system-out>" % escape("\n".join(v.notes)))
    out.append("</testsuite>")
    return "\n".join(out) + "\n"
