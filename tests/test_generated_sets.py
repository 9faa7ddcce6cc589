"""Sets of cases too big for the repository, generated with tools/gen (Paddle 2.6.2) and checked
here when asked: PSTRANSPILE_GEN_SETS names their folders (`:`-separated), e.g.

    .venv/bin/python tools/gen/gen.py set zoo /work/gen-out/zoo     # PaddleRec's zoo, ~760 MB
    .venv/bin/python tools/gen/gen.py set clip /work/gen-out/clip   # issue 28's clip set
    PSTRANSPILE_GEN_SETS=/work/gen-out/zoo:/work/gen-out/clip \\
        .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_generated_sets.py

Each case: `split` equals Paddle's output (or refuses as Paddle does, writing nothing); `check`
on Paddle's split names nothing but Paddle faults (a finding that names none is a false alarm
of check's or an unknown Paddle fault). Without the variable the tests are skipped; a case
Paddle could not build (no expected/) is left out. Slow: minutes per hundred cases."""
import os
import re

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from golden import is_refused, split_and_compare

pytestmark = pytest.mark.slow
ROOTS = [r for r in os.environ.get("PSTRANSPILE_GEN_SETS", "").split(":") if r]


def _cases() -> list:
    out = []
    for root in ROOTS:
        for name in sorted(os.listdir(root)):
            case = os.path.join(root, name)
            if os.path.isfile(os.path.join(case, "case.json")) and \
                    os.path.isdir(os.path.join(case, "expected")):
                out.append(case)
    return out


CASES = _cases()


def _id(case):
    return "%s/%s" % (os.path.basename(os.path.dirname(case)), os.path.basename(case))


@pytest.mark.skipif(not ROOTS, reason="PSTRANSPILE_GEN_SETS names no generated set")
def test_the_sets_have_cases():
    assert CASES, "no case with case.json and expected/ under %s" % ROOTS


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_case_matches_paddle(case, tmp_path):
    output, diffs = split_and_compare(case, str(tmp_path / "out"))
    assert not diffs, "\n".join([output] + diffs[:40])


@pytest.mark.parametrize("case", [c for c in CASES if not is_refused(c)], ids=_id)
def test_check_on_paddles_split_names_only_paddle_faults(case):
    r = CliRunner().invoke(cli_main, [
        "check", os.path.join(case, "main.pb"), "--startup", os.path.join(case, "startup.pb"),
        "--cluster", os.path.join(case, "cluster.yaml"), os.path.join(case, "expected")])
    assert r.exit_code in (0, 1), r.output
    if r.exit_code == 1:
        findings = [line for line in r.output.splitlines()
                    if not line.startswith("warning") and re.match(r"\S+ block \d+", line)]
        assert findings and re.search(r"Paddle fault [a-z0-9-]+", r.output), r.output
