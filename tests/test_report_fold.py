"""report.md folds what nobody reads whole: long lists become a count and a closed <details>
block, capped; a report's size stops growing with the program past the caps. Programs from
bench/gen.py (thousands of ops, hundreds of parameters, a sparse table per slot)."""
import importlib.util
import os
import re
import sys

import pytest

from transpile.core.config import load_config_text
from transpile.render import fold
from transpile.render.report import render_report
from transpile.split import split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gen():
    spec = importlib.util.spec_from_file_location("bench_gen_fold",
                                                  os.path.join(ROOT, "bench", "gen.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_gen_fold"] = mod
    spec.loader.exec_module(mod)
    return mod


_cache = {}


def _report(kind, ops, style):
    key = (kind, ops, style)
    if key not in _cache:
        gen = _gen()
        main, startup, _ = gen.generate_programs(kind, ops, "adam", vocab=1000)
        cfg = load_config_text(gen.cluster_yaml(4, style) + "trainer_id: all\n", "c.yaml")
        result = split(main, startup, cfg)
        _cache[key] = render_report(main, result.programs, result.plan, title="t", config=cfg)
    return _cache[key]


def _open_parts(text):
    """The report without its <details> blocks: what a viewer shows before a click."""
    return re.sub(r"<details>.*?</details>", "", text, flags=re.S)


@pytest.mark.parametrize("kind, style", [("mlp", "classic"), ("mlp", "fleet"), ("ctr", "ps"),
                                         ("ctr", "fleet")])
def test_long_lists_are_folded_and_capped(kind, style):
    text = _report(kind, 1500, style)
    assert "<details><summary>" in text
    shown = _open_parts(text)
    # open tables and listings are short; no open line lists hundreds of names
    for block in re.split(r"\n\s*\n", shown):
        rows = [x for x in block.splitlines() if x.startswith("|")]
        assert len(rows) <= fold.ROWS + 2, block[:300]
    assert max(len(x) for x in shown.splitlines()) < 1500
    # a folded block holds at most CAP entries and says how many it left out
    for body in re.findall(r"<details>.*?</details>", text, flags=re.S):
        assert sum(1 for x in body.splitlines() if x.startswith("|")) <= fold.CAP + 2
    assert re.search(r"… and \d+ more: ", text)


def test_a_report_stops_growing_with_the_program():
    small, big = _report("mlp", 1500, "classic"), _report("mlp", 3000, "classic")
    assert len(big) < 1.25 * len(small), (len(small), len(big))
    assert len(big) < 250_000


def test_short_lists_stay_inline():
    inline, block = fold.names(["a", "b", "c"], "ids")
    assert (inline, block) == ("a, b, c", [])
    inline, block = fold.names(["x%d" % i for i in range(26)], "ids")
    assert inline == "26 ids: x0, x1, x2, …"
    assert block[0] == "<details><summary>the 26 ids</summary>" and "x25" in block[2]


@pytest.mark.parametrize("n", [0, 1, fold.ROWS, fold.ROWS + 1, fold.CAP - 1, fold.CAP,
                               fold.CAP + 1, 3 * fold.CAP])
def test_a_listing_from_an_iterator_takes_only_the_lines_it_shows(n):
    lines = ["line %d" % i for i in range(n)]
    taken = []

    def lazy():
        for x in lines:
            taken.append(x)
            yield x
    assert fold.listing(lazy(), "the lines", "elsewhere", count=n) == \
        fold.listing(lines, "the lines", "elsewhere")
    assert len(taken) == min(n, fold.CAP)


def test_a_summary_is_escaped_as_html_escape_does_without_quotes():
    import html
    from transpile.render.fold import details
    for text in ("a<b>&c \"q\" 'x'", "&amp; &lt;", "", "plain"):
        assert details(text, ["x"])[0] == \
            "<details><summary>%s</summary>" % html.escape(text, quote=False)
