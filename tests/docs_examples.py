"""The documentation's examples and links, read as data (tests/test_docs.py runs them).

An example is a ```console block: lines starting with `$ ` are commands (a line ending with a
backslash goes on), the lines after a command are what it prints (stdout and stderr as a
terminal shows them). A printed line `...` stands for any number of lines; a line ending with
`...` for every line starting with what precedes it. Every other line must be printed as shown
(trailing blanks aside), in order, with nothing between the lines shown. The commands of one
page run one after the other in one folder, where `samples`, `configs` and `tests` are the
repository's.
"""
from __future__ import annotations

import os
import re

_FENCE = re.compile(r"^(```+|~~~+)\s*([\w-]*)\s*$")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def blocks(text: str) -> list:
    """[(info string, [lines], line number of the fence)] of the fenced blocks of a markdown
    text, and of nothing else."""
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not _closes(lines[i], fence):
            body.append(lines[i])
            i += 1
        out.append((info, body, start + 1))
        i += 1
    return out


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and set(s) == {fence[0]}


def outside_code(text: str, keep_inline: bool = False) -> str:
    """The text without its fenced blocks and (unless keep_inline) its inline code: where links
    are not links."""
    kept = []
    in_fence = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m and in_fence is None:
            in_fence = m.group(1)
            continue
        if in_fence is not None:
            if _closes(line, in_fence):
                in_fence = None
            continue
        kept.append(line if keep_inline else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def console_steps(body: list) -> list:
    """[(command, [expected lines])] of a console block."""
    steps = []
    cmd = None
    for line in body:
        if line.startswith("$ ") and (cmd is None or not cmd.endswith("\\")):
            if cmd is not None:
                steps.append((cmd, expected))
            cmd, expected = line[2:], []
        elif cmd is not None and cmd.endswith("\\") and not expected:
            cmd = cmd[:-1] + " " + line.strip()
        elif cmd is not None:
            expected.append(line)
    if cmd is not None:
        steps.append((cmd, expected))
    return steps


def matches(expected: list, actual: list) -> bool:
    """Whether `actual` lines are `expected` with its `...` elisions (see the module doc)."""
    expected = [x.rstrip() for x in expected]
    actual = [x.rstrip() for x in actual]
    memo: dict = {}

    def go(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            ok = j == len(actual)
        elif expected[i].strip() == "...":
            ok = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        elif j < len(actual) and _line_ok(expected[i], actual[j]):
            ok = go(i + 1, j + 1)
        else:
            ok = False
        memo[key] = ok
        return ok
    return go(0, 0)


def _line_ok(want: str, got: str) -> bool:
    if want.endswith("...") and want.strip() != "...":
        return got.startswith(want[:-3])
    return want == got


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (a link's text for a link) in lower case, every
    character but letters, digits, `_`, `-` and spaces dropped, spaces made dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set:
    """The anchors of a markdown text's headings (outside fenced blocks; a repeated heading
    gets -1, -2 ...)."""
    out = set()
    seen: dict = {}
    for line in outside_code(text, keep_inline=True).splitlines():
        m = _HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else "%s-%d" % (s, n))
    return out


def links(text: str) -> list:
    """The relative link targets of a markdown text (outside code)."""
    out = []
    for target in _LINK.findall(outside_code(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):     # http:, mailto: ...
            continue
        out.append(target)
    return out


def markdown_files(root: str) -> list:
    """Every markdown file of the repository the docs test reads (not .venv, not tests/.node,
    not the reference corpus's case folders)."""
    out = []
    for dirpath, dirnames, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in (
            "node_modules", "__pycache__", "out") and not (rel == os.path.join("tests", "corpus")))
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
    return out
