"""Renderers for a CheckReport: text (one line per finding), JSON, JUnit XML. Formatting only."""
from __future__ import annotations

import json

from .findings import CHECKS, CheckReport


def render_text(report: CheckReport, warnings: bool = True) -> str:
    """One line per finding (and warning), then a summary line."""
    lines = [f.line() for f in report.findings]
    if warnings:
        lines += ["warning: " + w.line() for w in report.warnings]
    n = len(report.findings)
    lines.append("%s: %s (%d program(s), %d warning(s))"
                 % (report.split_dir, "ok" if n == 0 else "%d finding(s)" % n,
                    len(report.programs), len(report.warnings)))
    return "\n".join(lines) + "\n"


def render_json(report: CheckReport) -> str:
    """The report as one JSON object (CheckReport.to_dict)."""
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n"


def render_junit(report: CheckReport) -> str:
    """JUnit XML: a failed test per finding, a passing test per check that found nothing."""
    # imported here: xml.sax.saxutils pulls in urllib.request and http.client (~40 ms of every
    # check's start otherwise)
    from xml.sax.saxutils import escape, quoteattr
    cases = []
    failed = {f.check for f in report.findings}
    for f in report.findings:
        cases.append('  <testcase classname=%s name=%s>\n    <failure message=%s type=%s>%s'
                     '</failure>\n  </testcase>'
                     % (quoteattr("pstranspile.check." + f.check), quoteattr(f.where()),
                        quoteattr(f.message), quoteattr(f.check), escape(f.line())))
    for c in CHECKS:
        if c not in failed and c != "golden":
            cases.append('  <testcase classname=%s name=%s/>'
                         % (quoteattr("pstranspile.check." + c), quoteattr(c)))
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuite name=%s tests="%d" failures="%d" errors="0" skipped="0">'
           % (quoteattr("pstranspile check " + report.split_dir), len(cases),
              len(report.findings))]
    out += cases
    if report.warnings:
        out.append("  <system-out>%s</system-out>"
                   % escape("\n".join("warning: " + w.line() for w in report.warnings)))
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


RENDERERS = {"text": render_text, "json": render_json, "junit": render_junit}
