"""How the model's own modules are imported (runs under Paddle's Python, in paddlerec_build.py).

TreeFinder imports every module found on a tree-relative sys.path entry under its tree-relative
file name, so that the op_callstack frames of model files read
"PaddleRec/models/rank/autoint/net.py" whatever folder holds the tree (Python's own path finder
would name them by absolute path).

It also applies source patches ({file, old, new, why}; paddlerec_inputs.PATCHES, recorded in
model.json "patched"): a one-line textual fix of a model file, for a model that cannot build
otherwise (the corpus recipe's kind, e.g. a NameError at some commit).  The file is NOT changed
on disk: the patched text is compiled under the file's own name, so frames still name the
PaddleRec file and line.  Each `old` must occur exactly once in its file.  No model of the
corpus commit needs one.
"""
import importlib.abc
import importlib.machinery
import os
import sys


class TreeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports modules found on sys.path entries inside the tree (relative entries,
    "<tree>/models/...") under their tree-relative file names, from their text on disk or from the
    patched text.  Python's own path finder would name them by absolute path."""

    def __init__(self, tree_rel, patched):
        self.tree_rel = tree_rel
        self.patched = patched          # {relative file path: patched source}

    def _entries(self, path):
        entries = sys.path if path is None else path
        return [e for e in entries if isinstance(e, str) and not os.path.isabs(e)
                and (e + os.sep).startswith(self.tree_rel + os.sep)]

    def find_spec(self, fullname, path=None, target=None):
        leaf = fullname.rpartition(".")[2]
        for entry in self._entries(path):
            pkg = os.path.join(entry, leaf)
            init = os.path.join(pkg, "__init__.py")
            if os.path.isfile(init):
                return self._spec(fullname, init, [pkg])
            cand = pkg + ".py"
            if os.path.isfile(cand):
                return self._spec(fullname, cand, None)
        return None

    def _spec(self, fullname, origin, search):
        # built by hand: importlib.util.spec_from_file_location would make origin absolute
        spec = importlib.machinery.ModuleSpec(fullname, self, origin=origin,
                                              is_package=search is not None)
        spec.has_location = True
        if search is not None:
            spec.submodule_search_locations = search
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        origin = module.__spec__.origin
        text = self.patched.get(origin)
        if text is None:
            with open(origin, encoding="utf-8") as f:
                text = f.read()
        exec(compile(text, origin, "exec"), module.__dict__)


def install(source_patches, tree_rel):
    """Install TreeFinder with the source patches applied; returns what was patched."""
    done = []
    patched = {}
    for p in source_patches:
        path = os.path.join(tree_rel, p["file"])
        text = patched.get(path)
        if text is None:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        if text.count(p["old"]) != 1:
            raise ValueError(f"source patch: {p['old']!r} occurs {text.count(p['old'])} "
                             f"times in {p['file']}")
        patched[path] = text.replace(p["old"], p["new"])
        done.append(f"{p['file']}: {p['old']!r} -> {p['new']!r}")
    sys.meta_path.insert(0, TreeFinder(tree_rel, patched))
    return done
