"""The reader's and the writer's optional compiled fast paths (transpile/format/wirescan_c.c,
wirewrite_c.c); everything else is in pyproject.toml. `optional=True`: without a C compiler
the install goes on without them and the reader and writer run in pure Python (the same
program read, the same bytes written, only slower)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("transpile.format.%s" % name, ["transpile/format/%s.c" % name],
                             optional=True)
                   for name in ("wirescan_c", "wirewrite_c")])
