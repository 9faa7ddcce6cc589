"""What a split produces, before anything is written."""
from __future__ import annotations

from dataclasses import dataclass, field

from .program import Program


@dataclass
class SplitResult:
    """The programs of a split, keyed by their path under the output folder without extension:
    "trainer_0/main", "trainer_0/startup", "pserver_127.0.0.1_6174/main", ...

    `runtime` holds the fleet style's communicator settings per trainer folder ("trainer_0" ->
    the runtime.json dict); `plan` is the JSON-able plan (plan.json).
    """
    programs: dict[str, Program] = field(default_factory=dict)
    runtime: dict[str, dict] = field(default_factory=dict)
    plan: dict = field(default_factory=dict)


def endpoint_dir(endpoint: str) -> str:
    """The output folder of a pserver endpoint: "pserver_<host>_<port>"."""
    return "pserver_" + endpoint.replace(":", "_")
