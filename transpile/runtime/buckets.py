"""A dense Adam table's bucket race, followed as the runtime ran it.

Paddle 2.6.2's `MemoryDenseTable::_PushDense` runs a push's rule on 10 buckets of the slice, each
in a thread of its own, and `DAdam::Update` multiplies the table's one pair of beta powers in
every bucket before it reads them (docs/ps-runtime.md, section 6): each bucket of a push uses the
powers after j of the push's 10 multiplications, j from 1 to 10, in the order the threads
happened to run, which changes from run to run. simulate runs the buckets in order 0..9 (bucket
k uses j = k + 1); Paddle's runs do not (measured: a random permutation of 1..10 in each push,
never a multiplication lost).

`run --local` follows the order the runtime took. Each trainer records every pull of its dense
tables (role.py, `trace<id>.npz`); the first pull after a push reads the table as that push left
it (the trainers take turns; in sync every trainer pulls after the pour). For each bucket of
such a push the prediction takes the j, of the 10 Paddle's code allows, whose update reproduces
the pulled values most closely; everything else (the moments, the rule, the other tables)
stays the prediction's own. A j is one discrete choice per bucket and push, of a learning-rate
factor shared by the bucket's values: a wrong rule is not absorbed, its values still differ
(and a push no j reproduces is named in a note). A bucket whose values no j changes (no
gradient, no moments) is blind: its thread may have multiplied last, so the push then ends ten
multiplications on.

The gradients a dense table is pushed are followed too (`grads`: what each trainer's step
pushed, role.py records them with the pulls): the trainers' float32 products sum in another
order in Paddle's kernels than in numpy's, and Adam turns that rounding, in a gradient near
zero (below its epsilon 1e-8; a bias before a batch norm has only such), into a step of up to
its learning rate, which the next steps feed back (measured: paddlerec-ps/dssm_async's first
push differs from the prediction's by 4.6e-8 and the tables by 5.4e-6 after it, 3e-3 after 8
pushes; with the runtime's own gradients every push of it is reproduced bit for bit). So each
push applies the runtime's gradient, and the gradient the prediction computed from the same
pulled values is kept beside it (`pushed`): the verdict compares them as values of their own
(local.py: to the tolerance plus the float64 variant's rounding of the same pushes), so a wrong
gradient still shows, and a wrong rule shows in a push no order reproduces.
"""
from __future__ import annotations

import numpy as np

from ..simulate.ps.tables.dense import TASK_POOL_SIZE, bucket
from ..simulate.ps.tables.server import split_dense

F32 = np.float32
STATE = ("Param", "Moment1", "Moment2")
# the pushed gradients' tolerance, times max(1, the largest gradient), plus the float64
# variant's rounding: Paddle's kernels round a trainer's forward and backward otherwise than
# numpy's (measured: ps/mlp_adam_sync's runtime gradient 1.4e-6 from the prediction's at 1.25,
# where the prediction is 2e-8 from float64's; docs/running.md, "Dense Adam")
GRAD_RTOL = 1e-5


def adam_tables(cluster):
    """(pserver index, table id, table) of every dense table with the adam rule."""
    return [(server.index, tid, table) for server in cluster.servers
            for tid, table in sorted(server.tables.items())
            if getattr(table, "rule_name", None) == "adam"]


def powers(start, beta):
    """The powers after 0..10 multiplications by `beta`, in float32 as Paddle multiplies."""
    out = [F32(start)]
    for _ in range(TASK_POOL_SIZE):
        out.append(F32(out[-1] * F32(beta)))
    return out


def last(bounds, exponents, blind=()) -> int:
    """How many of a push's multiplications of the powers stand at its end: the most any
    bucket read (the thread that wrote last reads what it wrote; two threads multiplying the
    same value lose one), 10 when a bucket is empty or `blind` (its values the same whatever
    it read: no gradient, no moments) (its thread, unseen, may write last)."""
    if blind or any(bounds[k] == bounds[k + 1] for k in range(TASK_POOL_SIZE)):
        return TASK_POOL_SIZE
    return max(max(pair(e)) for e in exponents)


def pair(e):
    """(multiplications of Beta2Pow, of Beta1Pow) a bucket read: one number for both, or a
    pair where another thread multiplied between the bucket's two reads."""
    return (e, e) if isinstance(e, int) else (int(e[0]), int(e[1]))


def _set_powers(v, p1, p2, e):
    """The powers as a bucket's update finds them before it multiplies them once more."""
    j2, j1 = pair(e)
    v["Beta1Pow"][0], v["Beta2Pow"][0] = p1[j1 - 1], p2[j2 - 1]


def run_push(table, grad, exponents):
    """One push of a dense Adam table whose bucket k reads the powers after exponents[k]
    multiplications (a number, or a pair: Beta2Pow's, Beta1Pow's)."""
    v, rule = table.values, table.rule
    p1, p2 = powers(v["Beta1Pow"][0], rule.beta1), powers(v["Beta2Pow"][0], rule.beta2)
    bounds = bucket(table.param_dim, TASK_POOL_SIZE)
    with np.errstate(divide="ignore", invalid="ignore"):
        for k, e in enumerate(exponents):
            _set_powers(v, p1, p2, e)
            rule.update(grad, bounds[k], bounds[k + 1])
    end = last(bounds, exponents)
    v["Beta1Pow"][0], v["Beta2Pow"][0] = p1[end], p2[end]


CANDIDATES = [j for j in range(1, TASK_POOL_SIZE + 1)]
PAIRS = [(a, b) for a in range(1, TASK_POOL_SIZE + 1) for b in range(1, TASK_POOL_SIZE + 1)
         if a != b]


def fit_push(table, grad, want, tol=0.0):
    """The exponents (one per bucket) whose push reproduces `want` (the pulled Param) most
    closely, applied to the table; (exponents, the largest difference left). A bucket no one
    number reproduces within `tol` tries the pairs: DAdam reads Beta2Pow and Beta1Pow one
    after the other, and another thread's multiplication can fall between the reads."""
    v, rule = table.values, table.rule
    p1, p2 = powers(v["Beta1Pow"][0], rule.beta1), powers(v["Beta2Pow"][0], rule.beta2)
    bounds = bucket(table.param_dim, TASK_POOL_SIZE)
    chosen, worst, blind = [], 0.0, []
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in range(TASK_POOL_SIZE):
            lo, hi = bounds[k], bounds[k + 1]
            before = {n: v[n][lo:hi].copy() for n in STATE}
            best, seen = None, []
            for group in (CANDIDATES, PAIRS):
                for e in group:
                    _set_powers(v, p1, p2, e)
                    rule.update(grad, lo, hi)
                    d = float(np.max(np.abs(v["Param"][lo:hi] - want[lo:hi]))) \
                        if hi > lo else 0.0
                    if e in (1, TASK_POOL_SIZE):
                        seen.append(v["Param"][lo:hi].copy())
                    if best is None or d < best[0]:     # ties: the first, fewest steps
                        best = (d, e, {n: v[n][lo:hi].copy() for n in STATE})
                    for n in STATE:
                        v[n][lo:hi] = before[n]
                if best[0] <= tol:
                    break
            if np.array_equal(seen[0], seen[-1]):   # what it read leaves no trace
                blind.append(k)
            d, e, after = best
            for n in STATE:
                v[n][lo:hi] = after[n]
            chosen.append(e)
            worst = max(worst, d)
    end = last(bounds, chosen, blind)
    v["Beta1Pow"][0], v["Beta2Pow"][0] = p1[end], p2[end]
    return chosen, worst


class Follower:
    """Installed on a prediction's cluster: its dense Adam tables take each push's bucket order
    from the runtime's pulls (`trace`: trainer -> [{table id: pulled values}] in pull order)
    and each dense push the runtime's gradient (`grads`: (trainer, step, table id) -> what
    that step pushed) where the prediction's own is within the tolerance of it."""

    def __init__(self, trace=None, rtol=1e-6, grads=None):
        self.trace, self.rtol, self.grads = trace, rtol, grads
        self.pushed: dict = {}          # (trainer, table id) -> [(predicted, runtime's)]
        self.offsets: dict = {}         # (trainer, step, table id) -> floats taken so far
        self.sending = None             # (trainer, step) of the send running
        self.orders: dict = {}          # (pserver, table id) -> [exponents of each push]
        self.unmatched: list = []       # (pserver, table id, push, difference)
        self.unseen: list = []          # (pserver, table id, push): no pull read it alone
        self.pending: dict = {}         # (pserver, table id) -> [(state before, grad)]
        self.pulls: dict = {}           # trainer -> pulls so far
        self.servers = 0

    def install(self, cluster) -> None:
        self.servers = len(cluster.servers)
        for index, tid, table in adam_tables(cluster):
            table.apply = self._apply(index, tid, table)
        real = cluster.pull_dense

        def pull_dense(tr):
            self._observe(cluster, tr)
            real(tr)
        cluster.pull_dense = pull_dense
        if self.grads is not None:
            self._follow_gradients(cluster)

    def _follow_gradients(self, cluster):
        """Each dense push takes the runtime's gradient of the same trainer, step and table
        (the module's docstring)."""
        send, push = cluster.send_dense, cluster.push_dense

        def send_dense(tr, ex, op):
            self.sending = (tr.tid, ex.step)
            try:
                return send(tr, ex, op)
            finally:
                self.sending = None

        def push_dense(tid, values):
            return push(tid, self._gradient(int(tid), values))
        cluster.send_dense, cluster.push_dense = send_dense, push_dense

    def _gradient(self, tid, values):
        """The gradient a push sends: the runtime's (its own kept beside it, for the
        verdict)."""
        if self.sending is None:
            return values
        t, s = self.sending
        full = self.grads.get((t, s, tid))
        at = self.offsets.get((t, s, tid), 0)
        if full is None or at + len(values) > len(full):
            return values
        got = np.asarray(full[at:at + len(values)], dtype=F32)
        self.offsets[(t, s, tid)] = at + len(values)
        self.pushed.setdefault((t, tid), []).append((s, np.array(values, dtype=F32), got))
        return got

    def _apply(self, index, tid, table):
        key = (index, tid)

        def apply(grad):
            grad = np.asarray(grad, dtype=F32)
            state = {n: np.array(a) for n, a in table.values.items()}
            self.pending.setdefault(key, []).append((state, grad))
            run_push(table, grad, list(range(1, TASK_POOL_SIZE + 1)))
        return apply

    def _observe(self, cluster, tr):
        j = self.pulls.get(tr.tid, 0)
        self.pulls[tr.tid] = j + 1
        seen = (self.trace or {}).get(tr.tid, [])
        pulled = seen[j] if j < len(seen) else {}
        for (index, tid), pushes in sorted(self.pending.items()):
            if not pushes or tid not in pulled:
                continue
            table = cluster.servers[index].table(tid)
            done = self.orders.setdefault((index, tid), [])
            want = split_dense(pulled[tid], self.servers)[index][:table.param_dim]
            if len(pushes) > 1:     # more than one push before a pull: their orders unseen
                self.unseen.extend((index, tid, len(done) + i) for i in range(len(pushes)))
                done.extend([list(range(1, TASK_POOL_SIZE + 1))] * len(pushes))
            else:
                state, grad = pushes[0]
                for n, a in state.items():
                    table.values[n][:] = a
                scale = float(np.max(np.abs(want))) if want.size else 0.0
                tol = self.rtol * max(1.0, scale)
                order, worst = fit_push(table, grad, want, tol)
                if worst > tol:
                    self.unmatched.append((index, tid, len(done), worst))
                done.append(order)
            self.pending[(index, tid)] = []

    def notes(self) -> list:
        """What the runtime's threads did, in a line per table."""
        out = []
        tables = sorted({tid for _, tid in self.orders})
        for tid in tables:
            pushes = [o for (i, t), orders in sorted(self.orders.items()) if t == tid
                      for o in orders]
            seen = [o for o in pushes if o is not None]
            whole = [o for o in seen if all(isinstance(e, int) for e in o)]
            perm = sum(1 for o in whole if sorted(o) == list(range(1, TASK_POOL_SIZE + 1)))
            inorder = sum(1 for o in whole if o == list(range(1, TASK_POOL_SIZE + 1)))
            out.append("dense Adam table %d: the prediction follows the order the runtime's 10 "
                       "bucket threads took in each of its %d pushes, as the pulls show (%d a "
                       "permutation of the 10 beta-power steps, %d in order 0..9, %d with a "
                       "bucket that read the two powers at different steps; docs/running.md, "
                       "\"Dense Adam\")" % (tid, len(seen), perm, inorder, len(seen) - len(whole)))
        for index, tid, push, worst in self.unmatched:
            out.append("dense Adam table %d, pserver %d, push %d: no order of its buckets "
                       "reproduces the runtime's pulled values (%.1e apart)"
                       % (tid, index, push, worst))
        if self.unseen:
            out.append("dense Adam tables %s: %d pushes with no pull of their own (their "
                       "bucket order is not seen: taken as 0..9)"
                       % (", ".join(str(t) for t in sorted({u[1] for u in self.unseen})),
                          len(self.unseen)))
        return out
