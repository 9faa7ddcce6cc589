"""Real recommendation models (PaddleRec's own model code, built by Paddle 2.6.2) against Paddle's
own splits: tests/corpus/paddlerec-classic (DistributeTranspiler), paddlerec-fleet (Fleet's
parameter-server passes), every mode the corpus has, and paddlerec-gen (more models made the
same way: an LR scheduler, a sequence model, a refusal). Refusals (geo without a sparse table,
a startup op the pserver cannot copy) exit 2 and write nothing."""
import os

import pytest

from golden import assert_refused_like_paddle, case_dirs, is_refused, split_and_compare

CASES = case_dirs("paddlerec-classic") + case_dirs("paddlerec-fleet") + case_dirs("paddlerec-gen")


def _id(case):
    return "%s/%s" % (os.path.basename(os.path.dirname(case)), os.path.basename(case))


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if is_refused(c)], ids=_id)
def test_refusal_is_one_line_and_writes_nothing(case, tmp_path):
    assert_refused_like_paddle(case, str(tmp_path / "out"))


def test_the_families_are_there():
    """The parametrization above is not empty (a missing corpus would pass vacuously)."""
    assert len(case_dirs("paddlerec-classic")) >= 7 and len(case_dirs("paddlerec-fleet")) >= 17
    assert len(case_dirs("paddlerec-gen")) >= 8
