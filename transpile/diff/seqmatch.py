"""Aligning two sequences the way difflib does, fast when it can be.

`opcodes(a, b)` gives difflib.SequenceMatcher(None, a, b, autojunk=False)'s opcodes, after
matching the common prefix and suffix; where every item the two have in common occurs once in
each (ops of a program and of its split, keyed by type and slots, mostly do) the matching blocks
are found in O(n log n) instead of difflib's quadratic search.
"""
from __future__ import annotations

import bisect
import difflib
from typing import Optional


def unique_matching_blocks(a: list, b: list) -> Optional[list]:
    """What difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() finds
    (without its closing sentinel), in O(n log n), when every item a and b have in common
    occurs once in each; None otherwise.

    SequenceMatcher takes the longest common run of the whole range (the leftmost in `a` of the
    longest), then recurses on what lies before it and after it. With unique items each common
    item belongs to exactly one maximal run (a diagonal), and a run never straddles the edge of
    a range the recursion makes (those edges are other runs' ends), so the recursion takes a run
    exactly when it fits, before and after, with every run taken before it in that order (longest
    first, then leftmost): one pass over the runs in that order, keeping the taken ones sorted.
    """
    where: dict = {}
    repeated = set()
    for j, x in enumerate(b):
        if x in where:
            repeated.add(x)
        else:
            where[x] = j
    seen = set()
    partner = []
    for x in a:
        j = where.get(x)
        if j is not None:
            if x in repeated or x in seen:
                return None
            seen.add(x)
        partner.append(j)
    runs = []
    n = len(a)
    i = 0
    while i < n:
        j = partner[i]
        if j is None:
            i += 1
            continue
        start = i
        i += 1
        while i < n and partner[i] == j + (i - start):
            i += 1
        runs.append((start, j, i - start))
    runs.sort(key=lambda r: (-r[2], r[0]))
    starts: list = []
    taken: list = []
    for r in runs:
        i, j, k = r
        p = bisect.bisect_left(starts, i)
        if p and taken[p - 1][1] + taken[p - 1][2] > j:
            continue
        if p < len(taken) and taken[p][1] < j + k:
            continue
        starts.insert(p, i)
        taken.insert(p, r)
    return taken


def difflib_opcodes(a: list, b: list) -> list:
    blocks = unique_matching_blocks(a, b)
    if blocks is None:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    # SequenceMatcher.get_opcodes, from the matching blocks
    codes = []
    i = j = 0
    for ai, bj, size in blocks + [(len(a), len(b), 0)]:
        if i < ai and j < bj:
            codes.append(("replace", i, ai, j, bj))
        elif i < ai:
            codes.append(("delete", i, ai, j, bj))
        elif j < bj:
            codes.append(("insert", i, ai, j, bj))
        i, j = ai + size, bj + size
        if size:
            codes.append(("equal", ai, i, bj, j))
    return codes


def opcodes(ka: list, kb: list) -> list:
    """difflib-style opcodes, with the common prefix and suffix matched before LCS."""
    n, m = len(ka), len(kb)
    pre = 0
    while pre < n and pre < m and ka[pre] == kb[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and suf < m - pre and ka[n - 1 - suf] == kb[m - 1 - suf]:
        suf += 1
    codes = []
    if pre:
        codes.append(("equal", 0, pre, 0, pre))
    mid_a, mid_b = ka[pre:n - suf], kb[pre:m - suf]
    if mid_a or mid_b:
        if not mid_a:
            codes.append(("insert", pre, pre, pre, m - suf))
        elif not mid_b:
            codes.append(("delete", pre, n - suf, pre, pre))
        else:
            for tag, i1, i2, j1, j2 in difflib_opcodes(mid_a, mid_b):
                codes.append((tag, i1 + pre, i2 + pre, j1 + pre, j2 + pre))
    if suf:
        codes.append(("equal", n - suf, n, m - suf, m))
    return codes
