"""bench/run.py's measurements: one command run as a process (wall time, peak RSS from wait4,
exit status) repeated into a median, and the machine the figures come from."""
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

    def __init__(self, status, times=(), rss=(), note="", cmd=None):
        self.status = status
        self.times = list(times)
        self.rss = list(rss)          # bytes
        self.note = note
        self.cmd = cmd
        self.out_bytes = None         # split: the bytes it wrote

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def median(self):
        return statistics.median(self.times) if self.ok and self.times else None

    @property
    def peak(self):
        return max(self.rss) if self.ok and self.rss else None


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


def measure(cmd, repeats, timeout, ok_codes=(0,), cwd=None, log=None) -> Run:
    times, rss = [], []
    for _ in range(repeats):
        wall, peak, rc, err = run_once(cmd, timeout, cwd)
        if rc is None:
            return Run("timeout", note="killed after %ds" % timeout, cmd=cmd)
        if rc not in ok_codes:
            line = next((ln for ln in reversed(err.strip().splitlines()) if ln.strip()), "")
            if "No such command" in err:
                return Run("n/a", note="no such command", cmd=cmd)
            return Run("failed", note="exit %d: %s" % (rc, line[:160]), cmd=cmd)
        times.append(wall)
        rss.append(peak)
        if log:
            log("    %.2fs %.0f MiB" % (wall, peak / 2 ** 20))
    return Run("ok", times, rss, cmd=cmd)


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
