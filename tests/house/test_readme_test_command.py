"""The README's test command passes on a fresh machine after only the README's set-up, and CI
runs that same command (issue 53: ``python -m pytest ...`` after ``pip install -e .`` failed with
``No module named pytest``). The command is ``bash .ci/run``: it installs what the tests need
(the Debian packages, the hashed test venv, the npm linters) before it runs the suite
(``.ci/test``). Checked here: the command, the order of .ci/run's steps, that the hashed lock
it installs holds what .ci/test runs, and (where this environment has xdist) .ci/test itself,
as a process, collecting a module."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from support.paths import ROOT



def readme_command() -> str:
    block = (ROOT / "README.md").read_text().split("<!-- test-command -->", 1)[1].split("<!-- /test-command -->", 1)[0]
    return "\n".join(x for x in block.strip().splitlines() if not x.startswith("```")).strip()


def test_the_readme_command_is_cis_entry_point_which_sets_up_before_it_tests() -> None:
    assert readme_command() == "bash .ci/run"
    run = (ROOT / ".ci" / "run").read_text()
    steps = [line for line in run.splitlines() if line and not line.startswith(("#", "echo"))]
    at = {what: next(i for i, line in enumerate(steps) if what in line)
          for what in ("apt-get install", ".ci/venv .venv", ". .venv/bin/activate", "npm ci", "bash .ci/test")}
    assert at["apt-get install"] < at[".ci/venv .venv"] < at[". .venv/bin/activate"] < at["bash .ci/test"]
    assert at["npm ci"] < at["bash .ci/test"] == len(steps) - 1
    assert "README.md" not in run  # it runs the suite itself, not a command read back from the README
    # the venv .ci/venv makes holds, pinned with hashes, every pytest plugin .ci/test uses
    venv = (ROOT / ".ci" / "venv").read_text()
    assert "--require-hashes -r requirements/dev.lock" in venv and "-e ." in venv
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    test = (ROOT / ".ci" / "test").read_text()
    assert "python -m pytest" in test and "-n 3" in test and '"$@"' in test
    for dist in ("pytest", "pytest-xdist", "pytest-timeout"):
        assert re.search(rf"^{dist}==\S+ \\\n\s+--hash=sha256:", lock, re.M), dist


def test_ci_audits_the_runtime_dependencies_against_pypis_advisories_before_the_suite() -> None:
    """Issue 54: .ci/run audits envbuild's runtime dependencies (.ci/runtime-deps: as installed,
    no test tool) with pip-audit, pinned with hashes, against PyPI's advisory service, failing
    on a package it could not look up (--strict), before the suite runs."""
    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "echo"))]
    at = {what: next(i for i, line in enumerate(steps) if what in line)
          for what in (". .venv/bin/activate", "bash .ci/audit", "bash .ci/test")}
    assert at[". .venv/bin/activate"] < at["bash .ci/audit"] < at["bash .ci/test"]
    audit = (ROOT / ".ci" / "audit").read_text()
    assert "pip-audit --vulnerability-service pypi --strict" in audit and ".ci/runtime-deps" in audit
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    assert re.search(r"^pip-audit==\S+ \\\n\s+--hash=sha256:", lock, re.M)
    listed = subprocess.run([sys.executable, str(ROOT / ".ci" / "runtime-deps")], capture_output=True, text=True,
                            check=True, timeout=60).stdout.split()
    pins = dict(line.split("==") for line in listed)
    from importlib.metadata import requires, version

    from packaging.requirements import Requirement

    direct = {canonicalize_name(r.name) for r in map(Requirement, requires("envbuild") or [])
              if r.marker is None or r.marker.evaluate({"extra": ""})}
    assert direct and direct <= pins.keys() and {"jinja2", "markupsafe", "pydantic-core"} <= pins.keys()
    assert not pins.keys() & {"envbuild", "pytest", "pip-audit", "hypothesis", "deptry"}
    assert all(version(name) == v for name, v in pins.items())


@pytest.mark.process
def test_the_suite_script_runs_pytest_with_the_ci_options() -> None:
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed here (.ci/venv installs it)")
    p = subprocess.run(["bash", str(ROOT / ".ci" / "test"), "--collect-only", "tests/house/test_suite_order.py"],
                       capture_output=True, text=True, timeout=300, cwd="/")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "test_the_suite_command_keeps_the_order" in p.stdout


@pytest.mark.process
def test_the_suite_script_keeps_its_temp_files_in_the_named_folder_and_removes_them(tmp_path) -> None:
    """ENVBUILD_TEST_TMP names where pytest's basetemp and TMPDIR go (.ci/test picks /dev/shm
    when it is a roomy tmpfs); what the run made there is gone when it ends, failed or not.
    Set empty: pytest's own default, no folder made."""
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed here (.ci/venv installs it)")
    script = ["bash", str(ROOT / ".ci" / "test"), "--collect-only", "tests/house/test_suite_order.py"]
    for args, rc in (([], 0), (["-k", "no such test", "--no-such-option"], 4)):
        p = subprocess.run(script + args, capture_output=True, text=True, timeout=300, cwd="/",
                           env={**os.environ, "ENVBUILD_TEST_TMP": str(tmp_path)})
        assert p.returncode == rc, p.stdout[-2000:] + p.stderr[-2000:]
        [line] = [x for x in p.stdout.splitlines() if x.startswith("temp files under ")]
        made = Path(line.split()[3])
        assert made.parent == tmp_path and made.name.startswith("envbuild-suite-")
        assert list(tmp_path.iterdir()) == []  # removed when the run ended
    p = subprocess.run(script, capture_output=True, text=True, timeout=300, cwd="/",
                       env={**os.environ, "ENVBUILD_TEST_TMP": ""})
    assert p.returncode == 0 and "temp files under" not in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]


@pytest.mark.process
def test_an_interrupted_suite_script_removes_its_temp_files(tmp_path) -> None:
    """SIGTERM to the run's process group (CI cancelling, Ctrl-C's SIGINT alike): pytest stops, and
    the folder .ci/test made under ENVBUILD_TEST_TMP goes with it; the exit is the signal's."""
    import signal
    import time

    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed here (.ci/venv installs it)")
    temp, tests = tmp_path / "temp", tmp_path / "t"
    temp.mkdir()
    tests.mkdir()
    (tests / "test_slow.py").write_text("import time\n\ndef test_slow():\n    time.sleep(120)\n")
    p = subprocess.Popen(["bash", str(ROOT / ".ci" / "test"), "-n", "0", "-p", "no:randomly", str(tests)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/",
                         start_new_session=True, env={**os.environ, "ENVBUILD_TEST_TMP": str(temp)})
    try:
        assert p.stdout.readline().startswith("temp files under ")
        [made] = list(temp.iterdir())
        assert made.name.startswith("envbuild-suite-") and (made / "tmp").is_dir()
        time.sleep(3)  # pytest is in the test by then (it sleeps 120 s)
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(timeout=60) == 143
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert list(temp.iterdir()) == []


def test_ci_lints_and_type_checks_in_the_venv_before_the_suite() -> None:
    """Issue 55: .ci/run runs ``ruff check .`` (pyproject's [tool.ruff]) and ``mypy`` (the
    [tool.mypy] baseline, its ``files``) in the test venv, after it is made and before the suite;
    both tools are pinned with hashes in the dev lock."""
    import tomllib

    steps = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", "echo"))]
    at = {what: steps.index(what) for what in (". .venv/bin/activate", "ruff check .", "mypy", "exec bash .ci/test \"$@\"")}
    assert at[". .venv/bin/activate"] < at["ruff check ."] < at["mypy"] < at["exec bash .ci/test \"$@\""]
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    for dist in ("ruff", "mypy"):
        assert re.search(rf"^{dist}==\S+ \\\n\s+--hash=sha256:", lock, re.M), dist
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    assert {"E", "F", "W", "B"} <= set(tool["ruff"]["lint"]["select"]) and tool["mypy"]["files"]


@pytest.mark.lint
def test_the_lint_and_type_configs_catch_what_they_are_for(tmp_path) -> None:
    """The check itself, with the project's own configuration: ruff reports an unused import
    (pyflakes), a line past the limit and an undefined name; mypy a value of the wrong type."""
    import tomllib

    limit = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\nx: int = 'one'\ny = '" + "z" * limit + "'\nprint(undefined)\n")
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                           "--config", str(ROOT / "pyproject.toml"), str(bad)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert ruff.returncode == 1, ruff.stdout + ruff.stderr
    assert {code for code in ("F401", "E501", "F821") if f" {code} " in ruff.stdout} == {"F401", "E501", "F821"}, ruff.stdout
    mypy = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "cache"), str(bad)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert mypy.returncode == 1, mypy.stdout + mypy.stderr
    assert "bad.py:3: error: Incompatible types in assignment" in mypy.stdout, mypy.stdout
