"""docs/ci.md's recipes run as written: the GitHub Actions and GitLab jobs' commands (the install
aside) and the pre-commit configuration's hooks, run the way pre-commit runs them (each hook's
entry from .pre-commit-hooks.yaml, its args, the files its pattern selects), on a repository
laid out as the page says: clean, then broken the ways the page shows."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = open(os.path.join(ROOT, "docs", "ci.md"), encoding="utf-8").read()
BIN = os.path.dirname(sys.executable)


def _block(marker):
    m = re.search(r"<!-- %s -->\n```yaml\n(.*?)```" % re.escape(marker), PAGE, re.S)
    assert m, marker
    return yaml.safe_load(m.group(1))


def _text_block_after(phrase):
    m = re.search(re.escape(phrase) + r".*?```text\n(.*?)```", PAGE, re.S)
    return m.group(1).splitlines()


@pytest.fixture
def repo(tmp_path):
    """model/main.pb, startup.pb, cluster.yaml and model/split, as docs/ci.md lays them out."""
    model = tmp_path / "model"
    model.mkdir()
    for f in ("main.pb", "startup.pb"):
        shutil.copy(os.path.join(ROOT, "samples", "ctr_sparse_adam", f), model / f)
    shutil.copy(os.path.join(ROOT, "configs", "ps_sync.yaml"), model / "cluster.yaml")
    _sh("pstranspile split model/main.pb --startup model/startup.pb --cluster model/cluster.yaml"
        " --out model/split --quiet", tmp_path, check=True)
    return tmp_path


def _sh(cmd, cwd, check=False, env=None):
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), **(env or {}))
    r = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert not check or r.returncode == 0, (cmd, r.stdout, r.stderr)
    return r.returncode, r.stdout + r.stderr


def _break(repo):
    """What the page's pre-commit output shows: a misspelt config added, a descriptor edited."""
    (repo / "model" / "cluster-test.yaml").write_text("pservers: [127.0.0.1:6174]\ntrainer: 2\n")
    desc = repo / "model" / "split" / "pserver_127.0.0.1_6174" / "server_desc.txt"
    desc.write_text(desc.read_text().replace("shard_num: 1000", "shard_num: 10", 1))


# --- the CI jobs ---------------------------------------------------------------------------------

def _github_steps():
    job = _block("ci: github")["jobs"]["split"]
    return [(s["name"], s["run"]) for s in job["steps"] if "run" in s
            and not s["run"].startswith("pip install")]


def _gitlab_steps():
    job = _block("ci: gitlab")["split"]
    assert job["artifacts"]["reports"]["junit"] == "check.xml"
    return [(c, c) for c in job["script"] if not c.startswith("pip install")]


@pytest.mark.parametrize("steps", [_github_steps, _gitlab_steps])
def test_the_ci_jobs_pass_on_a_sound_repository_and_fail_on_a_broken_one(repo, steps, tmp_path):
    env = {"RUNNER_TEMP": str(tmp_path / "runner")}
    os.makedirs(env["RUNNER_TEMP"])
    steps = [(name, cmd.replace("/tmp/split", str(tmp_path / "gl-split")))  # not a shared path
             for name, cmd in steps()]
    assert len(steps) == 3
    for name, cmd in steps:
        code, out = _sh(cmd, repo, env=env)
        assert code == 0, (name, out)
    assert 'failures="0"' in (repo / "check.xml").read_text()
    _break(repo)
    codes = []
    for name, cmd in steps:
        for d in (tmp_path / "runner" / "split", tmp_path / "gl-split"):
            shutil.rmtree(d, ignore_errors=True)
        codes.append(_sh(cmd, repo, env=env)[0])
    assert codes == [0, 1, 1], codes        # config untouched; the split's check and --expect fail
    assert 'failures="1"' in (repo / "check.xml").read_text()


# --- pre-commit ----------------------------------------------------------------------------------

def _hooks():
    hooks = yaml.safe_load(open(os.path.join(ROOT, ".pre-commit-hooks.yaml")))
    for h in hooks:
        assert {"id", "name", "entry", "language"} <= set(h), h
        assert h["language"] == "python"
        re.compile(h.get("files", ""))
    return {h["id"]: h for h in hooks}


def _run_hooks(repo):
    """{hook id: (exit code, output) or None when pre-commit would skip it}, for every hook of
    the page's .pre-commit-config.yaml, on every file of the repository (`--all-files`)."""
    defs = _hooks()
    config = _block("pre-commit: config")
    files = sorted(os.path.relpath(os.path.join(d, f), repo) for d, _, fs in os.walk(repo)
                   for f in fs)
    out = {}
    for entry in config["repos"][0]["hooks"]:
        hook = dict(defs[entry["id"]], **entry)
        chosen = [f for f in files if re.search(hook.get("files", ""), f)]
        if not chosen and not hook.get("always_run"):
            out[hook["id"]] = None
            continue
        argv = shlex.split(hook["entry"]) + list(hook.get("args", []))
        if hook.get("pass_filenames", True):
            argv += chosen
        out[hook["id"]] = _sh(" ".join(map(shlex.quote, argv)), repo)
    return out


def test_the_pre_commit_hooks_pass_on_a_sound_repository(repo):
    got = _run_hooks(repo)
    assert set(got) == {"pstranspile-config-check", "pstranspile-check"}
    for hook, (code, out) in got.items():
        assert code == 0, (hook, out)
        assert out == "", (hook, out)           # --quiet: nothing to read when all is well


def test_the_pre_commit_hooks_fail_as_the_page_shows(repo):
    _break(repo)
    got = _run_hooks(repo)
    assert got["pstranspile-config-check"][0] == 2
    assert got["pstranspile-check"][0] == 1
    shown = [x for x in _text_block_after("adds a misspelt config") if x and not (
        x.startswith("pstranspile ") and x.endswith(("Failed", "Passed"))) and not x.startswith("- ")]
    printed = got["pstranspile-config-check"][1] + got["pstranspile-check"][1]
    assert shown and all(line in printed.splitlines() for line in shown), (shown, printed)


def test_the_config_hook_selects_cluster_configs_only():
    pattern = _hooks()["pstranspile-config-check"]["files"]
    assert re.search(pattern, "model/cluster.yaml") and re.search(pattern, "cluster-a.yml")
    assert not re.search(pattern, ".github/workflows/ci.yaml")
    assert not re.search(pattern, "model/mycluster.yaml")
