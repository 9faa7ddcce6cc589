"""`split`: one pipeline for every style: validate, plan, run the passes, collect the result.

    style = style_of(config)                          (styles/registry.py)
    prep  = style.prepare(main, startup, config)      input fixes, the plan, the faults
    for unit in style.units(...):                     each trainer's main, startup, files;
        style.build(prep, unit, ...)                  each pserver: its pipelines of passes
    plan.json:    style.plan_parts(...): its early entries (while the programs are built),
                  then .finish(result)

Refusals (RefusedError) come from the plan, before any program is built, or from the pass that
meets them (the error names it). Every pass reads its inputs and returns new programs; the
inputs are never modified, so splitting twice gives the same result (Paddle's in-place
transpiler did not). `split --list-passes` prints each style's pipelines.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional

from .core.config import ClusterConfig
from .core.errors import ConfigError, ProgramFormatError, UserError
from .core.forked import (Forked, WorkQueue, share_pieces, take_pieces, workers_available,
                          worth_forking)
from .core.gcpause import paused_gc
from .core.jsonfmt import plain
from .ir.program import Program
from .ir.roles import is_optimize_op
from .ir.validate import validate_for_split, validate_structure
from .output.result import Sink, SplitResult
from .passes.pipeline import AfterHook, PassFailed
from .styles.base import Runner
from .styles.registry import style_of


INPUT_NAMES = ("main program", "startup program")


@dataclass(frozen=True)
class BuildOptions:
    """How split() builds: `names`, how its errors name the inputs; `after(pass, key,
    program)` sees every program after every pass (`split --dump-after`); `workers`: with 2
    and a sink that can be shared (split_to_folder's), a forked child and the parent share the
    pieces of work (Style.units: a trainer's programs and files, each pserver), each taking
    the next piece from one queue when it is free (the same bytes, gathered in the pieces'
    order); `lean`: the plan's lists of one entry per block are left as MadeItems
    (core/jsonfmt.py: each entry made when it is read, never all held; split_to_folder's),
    else made into lists (a plain JSON value)."""
    names: tuple = INPUT_NAMES
    after: Optional[AfterHook] = None
    workers: int = 1
    lean: bool = False


def split(main: Program, startup: Optional[Program], config: ClusterConfig,
          trainer_ids: Optional[list[int]] = None, *,
          progress: Optional[Callable[[int, int], None]] = None,
          sink: Optional[Sink] = None, how: BuildOptions = BuildOptions()) -> SplitResult:
    """Split a training program for a parameter-server cluster.

    `trainer_ids` defaults to the config's trainer_id ("all" = every id). Inputs are validated
    (`how.names`: how errors name them) and not modified. `progress(done, total)` is called as
    the pieces of work (Style.units) are done. With a `sink`, each program and text file is
    handed to it when built instead of being kept in the result (SplitResult.add). `how`:
    BuildOptions. Raises UserError (RefusedError) for programs that cannot be split.
    """
    names, after, workers = how.names, how.after, how.workers
    if startup is None:
        startup = Program.empty()
    validate_for_split(main, names[0])
    validate_for_split(startup, names[1])
    ids = trainer_ids if trainer_ids is not None else config.trainer_ids()
    if not any(is_optimize_op(op) for _, _, op in main.ops()):
        raise UserError("nothing to split: no optimizer ops found — was minimize() called "
                        "before the program was saved?")
    style = style_of(config)
    with paused_gc():
        prep = style.prepare(main, startup, config, ids)
        _check_size(prep.plan, config)
        build = _Building(style, prep, ids, Runner(after), sink)
        result = SplitResult(sink=sink)
        result.faults = list(prep.faults)
        if after is None and hasattr(sink, "sections") and worth_forking(
                workers, len(build.units), build.pservers(), len(main.global_block.ops)):
            made, parts = build.shared_with_a_child(progress)
        else:
            made, parts = build.in_turn(progress)
        _gather(result, made, sink)
        result.plan = parts.finish(result)
        if not how.lean:
            plain(result.plan)
    return result


class _Building:
    """The pieces of one split's work (Style.units) and how they are scheduled: in turn in
    this process, or shared with a forked child (core/forked.py) that takes the next piece
    from one queue when it is free; either way {piece index: its result} and plan.json's parts
    (Style.plan_parts), the same bytes."""

    def __init__(self, style, prep, trainer_ids: list, run: Runner, sink):
        self.style, self.prep, self.ids, self.run, self.sink = style, prep, trainer_ids, run, sink
        self.units = style.units(trainer_ids, list(prep.plan.endpoints))

    def pservers(self) -> int:
        return sum(1 for u in self.units if u.role == "pserver")

    def _piece(self, i: int) -> SplitResult:
        return _build_unit(self.style, self.prep, self.units[i], self.run, self.sink)

    def in_turn(self, progress) -> tuple:
        made = {}                   # unit index -> what building it added (a SplitResult)
        for i in range(len(self.units)):
            made[i] = self._piece(i)
            if progress:
                progress(len(made), len(self.units))
        return made, self.style.plan_parts(self.prep, self.ids)

    def shared_with_a_child(self, progress) -> tuple:
        parts = []

        def first():
            # while the child builds programs: what plan.json takes from the plan alone
            # (and the sink's encoding of it), else the last thing the split does
            parts.append(self.style.plan_parts(self.prep, self.ids))
            started = getattr(self.sink, "plan_started", None)
            if started is not None:
                started(parts[0])
        n = len(self.units)
        made, (theirs, sections) = share_pieces(
            n, self._piece,
            lambda queue: _build_units(self.style, self.prep, self.units, queue, self.run,
                                       self.sink),
            progress and (lambda done: progress(done, n)), _longest_first(self.units), first)
        made.update(theirs)
        self.sink.sections.update(sections)
        return made, parts[0]


def verify_after_pass(pass_name: str, key: str, prog: Program) -> None:
    """The structure checks of a split's input (blocks, op inputs naming vars in scope,
    parameters' dtypes and dims) on `prog` as pass `pass_name` left it: PassFailed naming the
    pass when they fail (a bug of that pass, or of one before it the checks could not see)."""
    try:
        validate_structure(prog)
        validate_for_split(prog, key, outputs=False)
    except ProgramFormatError as e:
        raise PassFailed("pass %s left %s broken: %s" % (pass_name, key, e.message)) from None


# per-trainer gradient copies a split may make its pservers declare (each a var of a pserver
# program and a name in plan.json: some 250 bytes of output)
MAX_TRAINER_COPIES = 4_000_000


class TooLarge(ConfigError):
    """A config that asks for more than a split can write (the CLI names the config file)."""


def _check_size(plan, config: ClusterConfig) -> None:
    """Refuse a split whose pservers would declare more than MAX_TRAINER_COPIES per-trainer
    gradient copies (sync: one per trainer and gradient block): gigabytes of output that
    no cluster runs."""
    copies = plan.trainer_copies() if hasattr(plan, "trainer_copies") else 0
    if copies > MAX_TRAINER_COPIES:
        raise TooLarge(
            "trainers: %d trainers x %d gradient blocks: the pservers would declare %d "
            "per-trainer gradient copies (sync mode keeps one per trainer and block), at most "
            "%d: use fewer trainers or fewer, larger blocks (min_block_size, slice_var_up)"
            % (config.trainers, copies // config.trainers, copies, MAX_TRAINER_COPIES))


# the pieces of a split by how long they take to build, longest first: a trainer's main program
# (its passes, and the diff against the original that report.md shows), then a trainer's startup
# program and its other files (the startup declares every block the trainer receives, at 64
# pservers several times what one pserver costs; a fleet trainer's runtime.json holds a
# context per parameter), then each pserver: the pieces taken last, each worked on alone
# while the other process may have nothing left, are the small ones
_COST_RANK = {("trainer", "main"): 0, ("trainer", "startup"): 1, ("trainer", "files"): 1,
              ("pserver", ""): 2}


def _longest_first(units: list) -> list:
    """The order two processes take the pieces in: the longest first (else the one that takes
    a trainer's main program last works on alone at the end), in their own order within a
    rank. Only when they are built changes: they are gathered in their own order."""
    return sorted(range(len(units)),
                  key=lambda i: _COST_RANK.get((units[i].role, units[i].part), 3))


def _build_unit(style, prep, unit, run, sink) -> SplitResult:
    """Build one piece of the split into a result of its own (its programs and files handed
    to `sink` when there is one)."""
    part = SplitResult(sink=sink)
    style.build(prep, unit, part, run)
    return part


def _build_units(style, prep, units: list, queue: WorkQueue, run, sink) -> tuple:
    """In a forked child: build the pieces it takes from `queue` (their files written by the
    shared sink); what the parent needs of them: ({unit index: its result}, report
    sections). The results hold no programs: the sink has written them."""
    sink.sections = {}

    def build(i):
        made = _build_unit(style, prep, units[i], run, sink)
        made.sink = None                    # not sent back
        return made
    return take_pieces(queue, build), sink.sections


def _gather(result: SplitResult, made: dict, sink) -> None:
    """The pieces' results in `result`, in the order of the pieces, whoever built which: the
    order one process building them in turn gives (plan.json and report.md follow it)."""
    for i in sorted(made):
        part = made[i]
        result.programs.update(part.programs)
        result.summaries.update(part.summaries)
        result.runtime.update(part.runtime)
        result.texts.update(part.texts)
    if sink is not None and hasattr(sink, "sections"):
        sink.sections = {k: sink.sections[k] for k in result.summaries if k in sink.sections}


class _FolderSink:
    """Writes each program (and its report section) and text file as the split makes it. A
    write that fails is a UserError naming the folder, in whichever process makes the file
    (a forked child reports it as such)."""

    def __init__(self, stage, main: Program, out_dir: str, title: str, config):
        self.stage, self.main, self.out_dir = stage, main, out_dir
        self.title, self.config = title, config
        self.sections: dict = {}
        self.plan_ready: dict = {}      # plan.json entries made ahead (outdir.spill_entries)
        self.report_head: Optional[list] = None     # report.md's head, made ahead

    def _write(self, rel: str, data) -> None:
        try:
            self.stage.write(rel, data)
        except OSError as e:
            raise _cannot_write(self.out_dir, e) from None

    def plan_started(self, parts) -> None:
        """plan.json's entries that the plan alone decides (`parts.early`), encoded while the
        programs are built (split's first(): on a large split, most of plan.json's bytes),
        and report.md's head where they decide it."""
        from .output.outdir import spill_entries
        from .render.report import early_report_head
        early = parts.early
        self.plan_ready = spill_entries(early, self.scratch())
        self.report_head = early_report_head(early, parts.LATE, self.title, self.config)

    def scratch(self) -> str:
        """The scratch file in the staging folder that plan_started writes (removed by
        drop_scratch before the folder is put in place)."""
        return os.path.join(self.stage.root, ".plan.json.early")

    def drop_scratch(self) -> None:
        if self.plan_ready:
            os.remove(self.scratch())
            self.plan_ready = {}

    def program(self, key: str, prog: Program) -> None:
        # each program is written as soon as it is built and then let go: a split to many
        # pservers is many times larger than its input
        from .format import programio
        from .render.report import program_section
        # its report section first: the diff of a trainer's main program against the original
        # is then not made on top of what writing the program leaves cached
        lines = program_section(key, self.main, prog)
        self.sections[key] = ["\n".join(lines)] if lines else []     # one string: less to hold
        del lines
        self._write(key + ".pb", programio.to_chunks(prog))

    def text(self, rel: str, text: str) -> None:
        self._write(rel, text.encode("utf-8"))

    def text_pieces(self, rel: str, pieces: list) -> None:
        self._write(rel, pieces)

    def runtime(self, folder: str, runtime: dict) -> None:
        from .output.runtime import runtime_bytes
        self._write(folder + "/runtime.json", runtime_bytes(runtime))


@dataclass(frozen=True)
class WriteOptions:
    """How split_to_folder writes: `force`, replacing the split in the folder (output/target.py);
    `title` heads report.md; `names`, how errors name the inputs; `dump_after`: a pass name,
    the program after that pass is written too, as JSON text under dump/ (every program whose
    pipeline runs it); `verify_each_pass`: the structure checks a split's input passes
    (ir/validate.py) run on every program after every pass, a pass that leaves one broken is
    named (PassFailed, exit 3)."""
    force: bool = False
    title: str = "split"
    names: tuple = INPUT_NAMES
    dump_after: Optional[str] = None
    verify_each_pass: bool = False


def split_to_folder(main: Program, startup: Optional[Program], config: ClusterConfig,
                    out_dir: str, how: WriteOptions = WriteOptions(), *,
                    progress: Optional[Callable[[int, int], None]] = None) -> SplitResult:
    """Split and write the split folder `out_dir` atomically: every program (.pb), runtime.json
    or the descriptors, plan.json and report.md. Nothing is written when anything fails.
    `how`: WriteOptions."""
    from .format import protowrite, textform
    from .format.opsource import changed_inputs
    from .output import outdir
    from .render.report import report_chunks
    workers = workers_available()
    dumped = []
    try:
        with outdir.staged(out_dir, how.force) as stage:
            sink = _FolderSink(stage, main, out_dir, how.title, config)

            def after(pass_name, key, prog):
                if how.verify_each_pass:
                    verify_after_pass(pass_name, key, prog)
                if pass_name == how.dump_after:
                    dumped.append(key)
                    stage.write("dump/%s.%s.json" % (key, pass_name),
                                textform.dumps(prog).encode("utf-8"))

            watched = how.dump_after or how.verify_each_pass
            result = split(main, startup, config, progress=progress, sink=sink,
                           how=BuildOptions(how.names, after if watched else None, workers,
                                            lean=True))
            protowrite.release_caches()         # every program is written
            changed = changed_inputs(main, startup)
            if changed:
                raise UserError("%s: written while it was being split (the split read it "
                                "again as it wrote): nothing written" % ", ".join(changed))
            if how.dump_after and not dumped:
                raise UserError("--dump-after %s: no pipeline of this split runs a pass of "
                                "that name (split --list-passes lists them)" % how.dump_after)

            def write_json():
                try:            # (each runtime.json was written as it was made: _FolderSink)
                    stage.write("plan.json", outdir.json_chunks(result.plan,
                                                                 ready=sink.plan_ready))
                except OSError as e:        # (a forked child reports a UserError)
                    raise _cannot_write(out_dir, e) from None
            # plan.json by a forked child while this process writes the rest: on a large
            # split, megabytes of JSON, the last thing a split does
            writer = Forked(write_json) if worth_forking(
                workers, 2, len(config.pservers), len(main.global_block.ops)) else None
            try:
                if writer is None:
                    write_json()
                for rel, text in result.texts.items():
                    stage.write(rel, text.encode("utf-8"))
                stage.write("report.md", (piece.encode("utf-8") for piece in report_chunks(
                    main, {}, result.plan, title=how.title, config=config,
                    sections=sink.sections, head=sink.report_head)))
            except BaseException:
                if writer is not None:
                    writer.abandon()
                raise
            if writer is not None:
                writer.result()
            sink.drop_scratch()
    except OSError as e:
        raise _cannot_write(out_dir, e) from None
    result.replaced, result.kept = stage.replaced, stage.kept
    return result


def _cannot_write(out_dir: str, e: OSError) -> UserError:
    return UserError("%s: cannot write (%s)" % (out_dir, e.strerror or e))


def pass_listing() -> list:
    """(style name, modes, program kind, [(pass, what it does)]) of every pipeline of every
    style (`split --list-passes`)."""
    from .styles.registry import all_styles
    out = []
    for style in all_styles():
        for kind, modes, pipe in style.pipeline_variants():
            out.append((style.traits.name, modes, kind, [(p.name, p.doc) for p in pipe.passes]))
    return out
