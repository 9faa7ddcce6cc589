"""The rewrites per style: each pass reads the original programs and the style's plan and
returns new programs (classic/, fleet/), with the op and var builders they share (build)."""
