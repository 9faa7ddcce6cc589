"""What `split` prints of a split folder, in each style: its SUMMARY hook (core/stylehooks.py).
(report.md's head, the REPORT hook, is registered in report.py beside the heads it draws.)"""
from __future__ import annotations

from ..core.styles import CLASSIC, FLEET, PS
from ..core.stylehooks import SUMMARY
from .psreport import print_summary
from .show import print_split_summary

for _traits in (CLASSIC, FLEET):
    SUMMARY.register(_traits.name, print_split_summary)
SUMMARY.register(PS.name, print_summary)
