"""Formatting only, deciding nothing: a program listing and the split summary (show), report.md
(report), the placement table of `pstranspile plan` (placement), the structural diff of two
programs or split folders (diff, with diffops, diffresult, seqmatch) and its renderers
(diff_render), JSON text of result objects (jsonfmt)."""
