"""What a split produces, before anything is written."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Optional, Protocol

from ..ir.program import Program


@dataclass
class ProgramSummary:
    """What plan.json says of one program of a split, taken when the program is built so that
    the program itself need not be kept: its size, its op types, and for a pserver main what
    its listen_and_serv says (grad -> optimize block, the LR-decay block)."""
    blocks: int
    ops: int
    op_types: Counter
    grad_to_block: dict = field(default_factory=dict)
    lr_block: int = -1

    @classmethod
    def of(cls, prog: Program) -> "ProgramSummary":
        types = op_type_counts(prog)
        out = cls(len(prog.blocks), sum(types.values()), types)
        las = next((op for op in prog.global_block.ops if op.type == "listen_and_serv"),
                   None) if types.get("listen_and_serv") else None
        if las is not None:
            for entry in las.attr("grad_to_block_id") or []:
                name, idx = entry.rsplit(":", 1)
                out.grad_to_block[name] = int(idx)
            out.lr_block = las.attr("lr_decay_block_id", -1)
        return out


def op_type_counts(prog: Program) -> Counter:
    """How many ops of each type the program has, over all blocks."""
    return Counter(map(_type_of, chain.from_iterable(b.ops for b in prog.blocks)))


_type_of = attrgetter("type")


class Sink(Protocol):
    """Where a split's files go as they are made (split.py's folder writer): each program and
    text file is handed over once and not kept."""

    def program(self, key: str, prog: Program) -> None: ...

    def text(self, rel: str, text: str) -> None: ...


@dataclass
class SplitResult:
    """The programs of a split, keyed by their path under the output folder without extension:
    "trainer_0/main", "trainer_0/startup", "pserver_127.0.0.1_6174/main", ...

    `runtime` holds the fleet style's communicator settings per trainer folder ("trainer_0" ->
    the runtime.json dict) unless a sink wrote them; `texts` other files by path
    ("trainer_0/worker_desc.txt" -> the ps style's descriptor text); `plan` is the JSON-able
    plan (plan.json); `summaries` what the plan says of each program; `faults` the Paddle
    faults the split reproduces or fixes.

    With a `sink`, each program is handed to sink.program(key, program) as soon as it is built
    and not kept in `programs` (the folder writer writes it and lets it go: a split to many
    pservers is larger than its input many times over); each text file to sink.text(path,
    text).

    `replaced` / `kept`: what split_to_folder found in the folder it wrote: the entries of
    an earlier split it replaced (--force), the other entries it kept.
    """
    programs: dict[str, Program] = field(default_factory=dict)
    runtime: dict[str, dict] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    plan: dict = field(default_factory=dict)
    summaries: dict[str, ProgramSummary] = field(default_factory=dict)
    faults: list = field(default_factory=list)      # plan/faults.py Fault: found in the input
    sink: Optional[Sink] = field(default=None, repr=False)
    replaced: list = field(default_factory=list)
    kept: list = field(default_factory=list)

    def add_text(self, rel: str, text: str) -> None:
        """A text file of the split is made: keep it or hand it to the sink."""
        if self.sink is None:
            self.texts[rel] = text
        else:
            self.sink.text(rel, text)

    def add_text_pieces(self, rel: str, pieces: list) -> None:
        """add_text of the text whose UTF-8 bytes are `pieces`: a sink that writes pieces
        (text_pieces) gets them as they are, without joining or decoding megabytes."""
        write = getattr(self.sink, "text_pieces", None)
        if write is not None:
            write(rel, pieces)
        else:
            self.add_text(rel, b"".join(pieces).decode("utf-8"))

    def add_runtime(self, folder: str, runtime: dict) -> None:
        """A trainer's runtime.json (fleet style) is made: handed to a sink that writes it
        (sink.runtime) as it is made, else kept (simulate reads it; at 64 pservers its send
        and receive contexts are megabytes)."""
        write = getattr(self.sink, "runtime", None)
        if write is not None:
            write(folder, runtime)
        else:
            self.runtime[folder] = runtime

    def add(self, key: str, prog: Program) -> None:
        """A program of the split is built: summarize it, then keep it or hand it over."""
        self.summaries[key] = ProgramSummary.of(prog)
        if self.sink is None:
            self.programs[key] = prog
        else:
            self.sink.program(key, prog)


def endpoint_dir(endpoint: str) -> str:
    """The output folder of a pserver endpoint: "pserver_<host>_<port>"."""
    return "pserver_" + endpoint.replace(":", "_")
