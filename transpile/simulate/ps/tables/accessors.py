"""The sparse accessors of Paddle 2.6.2: a row's layout and what Create / Select / Update /
Merge / NeedExtendMF / Shrink do with it (`ps/table/sparse_accessor.cc`, `ctr_accessor.cc`,
`ctr_double_accessor.cc`).

Rows are float32 arrays [rows, dim] laid out as Paddle lays them; a row's "mf" tail (from
`mf_start`: embedx_w and its rule state, in Paddle's order) is what a short row lacks. Pushed
values are [rows, 4 + embedx_dim]: slot, show, click, embed_g, embedx_g.
"""
from __future__ import annotations

import numpy as np

from ....core.errors import UserError
from . import TableError
from .rules import F32, make_rule


class SparseAccessor:
    """`SparseAccessor`: row `slot, unseen_days, delta_score, show, click, embed_w,
    embed_state, embedx_w, embedx_state`; pull `embed_w, embedx_w`; the rules' scale is the
    pushed show."""
    name = "SparseAccessor"
    double_counts = False
    uses_config_zero_init = True

    def __init__(self, param, where: str = "accessor"):
        self.where = where
        self.embedx_dim = int(param.embedx_dim)
        self.embed_rule = make_rule(param.embed_sgd_param, 1, where + ".embed_sgd_param")
        self.embedx_rule = make_rule(param.embedx_sgd_param, self.embedx_dim,
                                     where + ".embedx_sgd_param")
        ctr = param.ctr_accessor_param
        self.nonclk_coeff = F32(ctr.nonclk_coeff)
        self.click_coeff = F32(ctr.click_coeff)
        self.embedx_threshold = F32(param.embedx_threshold)
        self.decay_rate = F32(ctr.show_click_decay_rate)
        self.delete_threshold = F32(ctr.delete_threshold)
        self.delete_after_unseen_days = F32(ctr.delete_after_unseen_days)
        self.zero_init = bool(ctr.zero_init) if self.uses_config_zero_init else True
        self.show_scale = bool(ctr.show_scale)
        self._layout()

    def _layout(self):
        e, x, s = self.embed_rule.dim(), self.embedx_dim, self.embedx_rule.dim()
        self.slot, self.unseen_days, self.delta_score, self.show, self.click = range(5)
        self.embed_w, self.embed_state = 5, 6
        self.embedx_w = 6 + e
        self.embedx_state = self.embedx_w + x
        self.dim = self.embedx_state + s
        self.mf_start = self.embedx_w
        self.select_dim = 1 + x

    @property
    def update_dim(self) -> int:
        return 4 + self.embedx_dim

    @property
    def short_dim(self) -> int:
        return self.mf_start

    # --- show / click ------------------------------------------------------------------------
    def counts(self, rows):
        """(show, click) of rows (float32; float64 for CtrDoubleAccessor)."""
        rows = np.asarray(rows)
        return rows[:, self.show].astype(F32), rows[:, self.click].astype(F32)

    def set_counts(self, rows, show, click):
        rows[:, self.show] = show
        rows[:, self.click] = click

    def score(self, show, click):
        """ShowClickScore: (show - click) * nonclk_coeff + click * click_coeff."""
        return (show - click) * self.nonclk_coeff + click * self.click_coeff

    # --- Create / Select ---------------------------------------------------------------------
    def create(self, embed_u, embedx_u):
        """New full rows from uniforms in [0, 1): embed [rows, 1], embedx [rows, embedx_dim]."""
        n = len(embed_u)
        rows = np.zeros((n, self.dim), dtype=F32)
        rows[:, self.slot] = -1
        e, x = self.embed_rule.dim(), self.embedx_dim
        rows[:, self.embed_w] = self.embed_rule.init_weights(embed_u, self.zero_init)[:, 0]
        rows[:, self.embed_state:self.embed_state + e] = self.embed_rule.init_state(n)
        rows[:, self.embedx_w:self.embedx_w + x] = self.embedx_rule.init_weights(embedx_u,
                                                                                 False)
        rows[:, self.embedx_state:self.dim] = self.embedx_rule.init_state(n)
        return rows

    def set_weights(self, rows, embed, embedx):
        """Write embed_w ([rows, 1]) and embedx_w ([rows, embedx_dim]) into full rows."""
        rows[:, self.embed_w] = np.asarray(embed, F32).reshape(len(rows), -1)[:, 0]
        rows[:, self.embedx_w:self.embedx_w + self.embedx_dim] = np.asarray(embedx, F32)

    def split_embedding(self, emb):
        """(embed, embedx) of trainer embedding rows laid out as a pull answers."""
        emb = np.asarray(emb, F32)
        return emb[:, :1], emb[:, 1:1 + self.embedx_dim]

    def select(self, rows):
        """Select: the pull value of full rows."""
        rows = np.asarray(rows, F32)
        return np.concatenate([rows[:, self.embed_w:self.embed_w + 1],
                               rows[:, self.embedx_w:self.embedx_w + self.embedx_dim]], axis=1)

    # --- Update / Merge / NeedExtendMF / Shrink ----------------------------------------------
    def rule_scale(self, push_show):
        return push_show

    def update(self, rows, push):
        """Update full-width rows with pushed values (one push per row); new rows."""
        rows = np.array(rows, dtype=F32, copy=True)
        push = self.check_push(push)
        ps, pc = push[:, 1], push[:, 2]
        show, click = self.counts(rows)
        self.set_counts(rows, show + ps.astype(show.dtype), click + pc.astype(click.dtype))
        rows[:, self.slot] = push[:, 0]
        rows[:, self.delta_score] += (ps - pc) * self.nonclk_coeff + pc * self.click_coeff
        rows[:, self.unseen_days] = 0
        scale = self.rule_scale(ps)
        e, x = self.embed_rule.dim(), self.embedx_dim
        w, st = self.embed_rule.update(rows[:, self.embed_w:self.embed_w + 1],
                                       rows[:, self.embed_state:self.embed_state + e],
                                       push[:, 3:4], scale)
        rows[:, self.embed_w:self.embed_w + 1] = w
        rows[:, self.embed_state:self.embed_state + e] = st
        s = self.embedx_rule.dim()
        w, st = self.embedx_rule.update(rows[:, self.embedx_w:self.embedx_w + x],
                                        rows[:, self.embedx_state:self.embedx_state + s],
                                        push[:, 4:4 + x], scale)
        rows[:, self.embedx_w:self.embedx_w + x] = w
        rows[:, self.embedx_state:self.embedx_state + s] = st
        return rows

    def check_push(self, push):
        push = np.asarray(push, dtype=F32)
        if push.ndim != 2 or push.shape[1] != self.update_dim:
            raise TableError("%s: a pushed value has %s floats, the accessor takes %d (slot, "
                             "show, click, embed_g, %d embedx_g)"
                             % (self.name, push.shape[1:] or "no", self.update_dim,
                                self.embedx_dim))
        return push

    def merge(self, a, b):
        """Merge two pushed values of one key (the client's): every field summed but the slot."""
        out = np.asarray(a, F32) + np.asarray(b, F32)
        out[..., 0] = np.asarray(a, F32)[..., 0]
        return out

    def need_extend_mf(self, rows):
        """NeedExtendMF: the show/click score reaches embedx_threshold."""
        show, click = self.counts(rows)
        return self.score(show, click) >= self.embedx_threshold.astype(show.dtype)

    def shrink(self, rows):
        """Shrink: show and click decay, then (new rows, the rows to delete)."""
        rows = np.array(rows, dtype=F32, copy=True)
        show, click = self.counts(rows)
        show, click = show * self.decay_rate, click * self.decay_rate
        self.set_counts(rows, show, click)
        delete = ((self.score(show, click) < self.delete_threshold)
                  | (rows[:, self.unseen_days] > self.delete_after_unseen_days))
        return rows, delete


class CtrCommonAccessor(SparseAccessor):
    """`CtrCommonAccessor`: SparseAccessor's row; pull `show, click, embed_w, embedx_w`; the
    rules' scale is the pushed show only with `show_scale`."""
    name = "CtrCommonAccessor"

    def _layout(self):
        super()._layout()
        self.select_dim = 3 + self.embedx_dim

    def rule_scale(self, push_show):
        return push_show if self.show_scale else np.ones_like(push_show)

    def split_embedding(self, emb):
        emb = np.asarray(emb, F32)
        return emb[:, 2:3], emb[:, 3:3 + self.embedx_dim]

    def select(self, rows):
        rows = np.asarray(rows, F32)
        show, click = self.counts(rows)
        return np.concatenate([show.astype(F32)[:, None], click.astype(F32)[:, None],
                               super().select(rows)], axis=1)


class CtrDoubleAccessor(CtrCommonAccessor):
    """`CtrDoubleAccessor`: row `unseen_days, delta_score, show (double), click (double),
    embed_w, embed_g2sum, slot, embedx_g2sum, embedx_w`; one state float per part (AdaGrad);
    the embed part always starts at 0."""
    name = "CtrDoubleAccessor"
    double_counts = True
    uses_config_zero_init = False

    def _layout(self):
        for part, rule in (("embed", self.embed_rule), ("embedx", self.embedx_rule)):
            if rule.dim() > 1:
                raise UserError("%s.%s_sgd_param: %s keeps %d state values per row; "
                                "CtrDoubleAccessor has room for 1 (SparseAdaGradSGDRule)"
                                % (self.where, part, rule.name, rule.dim()))
        self.unseen_days, self.delta_score, self.show, self.click = 0, 1, 2, 4
        self.embed_w, self.embed_state, self.slot = 6, 7, 8
        self.embedx_state, self.embedx_w = 9, 10
        self.dim = 10 + self.embedx_dim
        self.mf_start = 9
        self.select_dim = 3 + self.embedx_dim

    def counts(self, rows):
        rows = np.asarray(rows, F32)
        show = np.ascontiguousarray(rows[:, self.show:self.show + 2]).view(np.float64)[:, 0]
        click = np.ascontiguousarray(rows[:, self.click:self.click + 2]).view(np.float64)[:, 0]
        return show, click

    def set_counts(self, rows, show, click):
        for at, v in ((self.show, show), (self.click, click)):
            rows[:, at:at + 2] = np.asarray(v, np.float64).reshape(-1, 1).view(F32)

    def score(self, show, click):
        show, click = np.asarray(show, np.float64), np.asarray(click, np.float64)
        return ((show - click) * np.float64(self.nonclk_coeff)
                + click * np.float64(self.click_coeff))

    def shrink(self, rows):
        rows = np.array(rows, dtype=F32, copy=True)
        show, click = self.counts(rows)
        show = show * np.float64(self.decay_rate)
        click = click * np.float64(self.decay_rate)
        self.set_counts(rows, show, click)
        delete = ((self.score(show, click) < np.float64(self.delete_threshold))
                  | (rows[:, self.unseen_days] > self.delete_after_unseen_days))
        return rows, delete


ACCESSORS = {cls.name: cls for cls in (SparseAccessor, CtrCommonAccessor, CtrDoubleAccessor)}
NOT_SIMULATED = {"CtrDymfAccessor": "its Update and Merge do nothing on Paddle's CPU table "
                                    "(GPU PS only)"}


def make_accessor(param, where: str = "accessor"):
    """The accessor a TableAccessorParameter names; UserError naming `where` otherwise."""
    name = param.accessor_class
    if name in NOT_SIMULATED:
        raise UserError("%s: accessor_class %s is not simulated: %s"
                        % (where, name, NOT_SIMULATED[name]))
    cls = ACCESSORS.get(name)
    if cls is None:
        raise UserError("%s: accessor_class %r is not a sparse accessor of Paddle 2.6.2's CPU "
                        "tables (one of %s)" % (where, name, ", ".join(sorted(ACCESSORS))))
    return cls(param, where)
