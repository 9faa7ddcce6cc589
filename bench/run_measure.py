"""bench/run.py's measurements: one command run as a process (wall time, peak RSS from wait4,
exit status) repeated into a median, each run optionally paired with a floor process run right
after it (the ratio of the pair is that repeat's ratio; the figure is the median of those ratios),
and the machine the figures come from."""
from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time


class Run:
    """Outcome of timing one command: status ok / failed / n/a / timeout, times, peak RSS."""

    def __init__(self, status, times=(), rss=(), note="", cmd=None, floor_times=()):
        self.status = status
        self.times = list(times)
        self.rss = list(rss)          # bytes
        self.note = note
        self.cmd = cmd
        self.out_bytes = None         # split: the .pb bytes it wrote; check: those it checked
        self.floor_times = list(floor_times)   # the paired floor run after each of `times`
        self.floor_rss = []

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def median(self):
        return statistics.median(self.times) if self.ok and self.times else None

    @property
    def peak(self):
        return max(self.rss) if self.ok and self.rss else None

    @property
    def floor_median(self):
        return statistics.median(self.floor_times) if self.ok and self.floor_times else None

    @property
    def ratios(self) -> list:
        """Each repeat's time over its paired floor's."""
        return pair_ratios(self.times, self.floor_times) if self.ok and self.floor_times else []

    @property
    def ratio(self):
        """The median of the paired ratios (not the ratio of the medians)."""
        r = self.ratios
        return statistics.median(r) if r else None


def pair_ratios(times, floor_times) -> list:
    """times[i] / floor_times[i]: the command's run over the floor run right after it."""
    if len(times) != len(floor_times):
        raise ValueError("%d runs but %d floor runs" % (len(times), len(floor_times)))
    return [t / f for t, f in zip(times, floor_times)]


def run_once(cmd, timeout, cwd=None):
    """(wall seconds, max RSS bytes, exit code or None on timeout, stderr text)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                             cwd=cwd)
        killed = []

        def kill():
            killed.append(True)
            try:
                p.kill()
            except OSError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    rss = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return wall, rss, (None if killed else p.returncode), text


def _refused(rc, err, ok_codes, timeout, cmd):
    """The Run of a process that timed out or exited with a status not in ok_codes, or None."""
    if rc is None:
        return Run("timeout", note="killed after %ds" % timeout, cmd=cmd)
    if rc in ok_codes:
        return None
    if "No such command" in err:
        return Run("n/a", note="no such command", cmd=cmd)
    line = next((ln for ln in reversed(err.strip().splitlines()) if ln.strip()), "")
    return Run("failed", note="exit %d: %s" % (rc, line[:160]), cmd=cmd)


def measure(cmd, repeats, timeout, ok_codes=(0,), cwd=None, log=None, before=None, paired=None,
            run=run_once) -> Run:
    """Run `cmd` `repeats` times. before(): untimed, before each run (a split: remove its output
    folder). paired(): called after each run, returns (floor command, out_bytes); that floor is
    run right away and the pair gives that repeat's ratio (Run.ratio: the median of them)."""
    res = Run("ok", cmd=cmd)
    for _ in range(repeats):
        if before is not None:
            before()
        wall, peak, rc, err = run(cmd, timeout, cwd)
        bad = _refused(rc, err, ok_codes, timeout, cmd)
        if bad is not None:
            return bad
        res.times.append(wall)
        res.rss.append(peak)
        msg = "    %.2fs %.0f MiB" % (wall, peak / 2 ** 20)
        if paired is not None:
            fcmd, res.out_bytes = paired()
            fwall, fpeak, frc, ferr = run(fcmd, timeout, cwd)
            bad = _refused(frc, ferr, (0,), timeout, fcmd)
            if bad is not None:
                bad.note = "its floor_out: %s %s" % (bad.status, bad.note)
                bad.status = "failed"
                return bad
            res.floor_times.append(fwall)
            res.floor_rss.append(fpeak)
            msg += "; floor_out %.2fs (%.1f MB): %.2f×" % (fwall, res.out_bytes / 1e6,
                                                          wall / fwall)
        if log:
            log(msg)
    return res


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        import google.protobuf as pb
        from google.protobuf.internal import api_implementation
        protobuf = "%s (%s)" % (pb.__version__, api_implementation.Type())
    except Exception:  # noqa: BLE001
        protobuf = "?"
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": usable, "memory": mem,
            "python": platform.python_version(), "implementation": platform.python_implementation(),
            "os": "%s %s" % (platform.system(), platform.release()), "protobuf": protobuf}
