"""The diff engine: what differs between two programs, two split folders or two ps descriptors.

programs.py aligns and compares programs and folders (diff_programs, diff_trees), ops.py the ops
of two blocks, seqmatch.py the alignment itself, descriptors.py the descriptors field by field;
result.py holds what they find. Rendering it is transpile/render/diff_render.py's job; `check
--expect` turns it into findings (check/golden.py).
"""
