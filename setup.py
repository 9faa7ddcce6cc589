"""The reader's optional compiled fast path (transpile/format/wirescan_c.c); everything else is
in pyproject.toml. `optional=True`: without a C compiler the install goes on without it and the
reader runs in pure Python (the same program read, only slower)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("transpile.format.wirescan_c", ["transpile/format/wirescan_c.c"],
                             optional=True)])
