"""Field-by-field differences of two ps descriptors (worker_desc.txt / server_desc.txt).

Both texts are parsed as PSParameter (format/psdesc.py), so layout, field order and number
spelling do not count: a difference is a field set on one side only or with another value
(floats compared to 6 significant digits, as the corpus checker does), or a repeated field
of another length. Each difference is one line: its field path, then A's value -> B's.
"""
from __future__ import annotations

import json

from ..core.errors import UserError
from ..format.psdesc import as_dict, parse_text


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool):
            return a == b
        try:
            return float("%.6g" % a) == float("%.6g" % b)
        except TypeError:
            return False
    return a == b


def _show(v) -> str:
    s = json.dumps(v, sort_keys=True, ensure_ascii=False)
    return s if len(s) <= 100 else s[:97] + "..."


def _walk(a, b, path: str, out: list) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            p = "%s.%s" % (path, k) if path else k
            if k not in b:
                out.append("%s: %s -> (unset)" % (p, _show(a[k])))
            elif k not in a:
                out.append("%s: (unset) -> %s" % (p, _show(b[k])))
            else:
                _walk(a[k], b[k], p, out)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append("%s: %d entries -> %d" % (path, len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, "%s[%d]" % (path, i), out)
        return
    if not _same(a, b):
        out.append("%s: %s -> %s" % (path, _show(a), _show(b)))


def read_desc(path: str):
    """A descriptor file parsed (UserError when it cannot be read)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError("%s: cannot read (%s)" % (path, e)) from None
    return parse_text(text, path)


def desc_changes(a_path: str, b_path: str) -> list[str]:
    """The differences between two descriptor files (empty: the same)."""
    out: list = []
    _walk(as_dict(read_desc(a_path)), as_dict(read_desc(b_path)), "", out)
    return out
