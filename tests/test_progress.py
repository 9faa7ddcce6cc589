"""The progress callbacks of split and the bar they drive (only on a terminal, only when long)."""
import io
import os

from transpile import load, load_config, split
from transpile.commands.progress import progress_bar
from transpile.output.runtime import runtime_bytes

HERE = os.path.dirname(os.path.abspath(__file__))


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_split_reports_each_piece_of_work():
    case = os.path.join(HERE, "corpus", "fleet", "mlp_sgd_sync")
    calls = []
    split(load(os.path.join(case, "main.pb")), load(os.path.join(case, "startup.pb")),
          load_config(os.path.join(case, "cluster.yaml")), progress=lambda d, t: calls.append((d, t)))
    # the pieces of work (Style.units): one trainer's main, startup and files, two pservers
    assert calls == [(d, 5) for d in range(1, 6)]


def test_bar_drawn_on_a_terminal_once_the_run_is_long():
    out = _Terminal()
    with progress_bar("split", stream=out, after=0) as update:
        update(1, 2)
    assert out.getvalue()


def test_no_bar_when_piped_quiet_or_short():
    piped, quiet, short = io.StringIO(), _Terminal(), _Terminal()
    for stream, kw in ((piped, {"after": 0}), (quiet, {"after": 0, "quiet": True}),
                       (short, {"after": 60})):
        with progress_bar("split", stream=stream, **kw) as update:
            update(1, 2)
        assert stream.getvalue() == ""


def test_simulate_reports_each_step_of_both_runs():
    from transpile.simulate import simulate
    case = os.path.join(HERE, "corpus", "fleet", "mlp_sgd_sync")
    main, startup = load(os.path.join(case, "main.pb")), load(os.path.join(case, "startup.pb"))
    cfg = load_config(os.path.join(case, "cluster.yaml"))
    result = split(main, startup, cfg, trainer_ids=list(range(cfg.trainers)))
    calls = []
    simulate(main, startup, cfg, result.programs, result.runtime, steps=3,
             progress=lambda d, t: calls.append((d, t)))
    assert calls == [(d, 6) for d in range(1, 7)]


def test_check_reports_each_folder_read_and_each_group_of_checks(tmp_path):
    from transpile.check import CHECK_STEPS, check_dir
    from transpile.output.outdir import write_tree
    from transpile.format.programio import to_bytes
    case = os.path.join(HERE, "corpus", "fleet", "mlp_sgd_sync")
    main, startup = load(os.path.join(case, "main.pb")), load(os.path.join(case, "startup.pb"))
    cfg = load_config(os.path.join(case, "cluster.yaml"))
    result = split(main, startup, cfg)
    out = str(tmp_path / "split")
    files = {k + ".pb": to_bytes(p) for k, p in result.programs.items()}
    files.update({k + "/runtime.json": runtime_bytes(rt) for k, rt in result.runtime.items()})
    write_tree(out, files, False)
    calls = []
    report = check_dir(main, startup, cfg, out, progress=lambda d, t: calls.append((d, t)))
    assert not report.findings
    total = 3 + CHECK_STEPS                       # trainer_0 and two pservers, then the checks
    assert calls == [(d, total) for d in range(1, total + 1)]
