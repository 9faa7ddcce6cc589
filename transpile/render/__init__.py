"""Formatting only, deciding nothing: a program listing and the split summary (show), report.md
(report, psreport), the placement table of `pstranspile plan` (placement), and the renderers of
a diff (diff_render; the diff itself is computed by transpile/diff/)."""
