"""The styles' behaviours: what each one plans, which passes make its programs, what files a
split of it holds (base.py: the Style every style implements; classic.py, fleet.py, ps.py;
registry.py: the one place they are registered; compare.py: `pstranspile plan`'s figures)."""
