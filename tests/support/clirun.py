"""Run the envbuild command line in this process, as a subprocess would, in a fraction of the time.

``envbuild(*argv, env=..., cwd=..., input=...)`` calls ``envbuild.cli.main`` (the console
script's function: the same error handling and exit codes) with stdin, stdout and stderr
captured by click's test runner, ``os.environ`` replaced by ``env`` (when given: the whole
environment, as ``subprocess.run(env=...)`` takes it) and the working directory set to
``cwd``, all restored afterwards. It returns a ``subprocess.CompletedProcess``, so a test
written against a subprocess reads it unchanged.

What only a separate process shows (the console script's start-up, a signal, a traceback on a
real stderr, a process that outlives the command) stays tested with subprocesses
(tests/cli/test_cli_recipes.py, tests/cli/test_bad_input.py, tests/provision/test_provision_interrupt.py).
"""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from envbuild.cli import main


def envbuild(*argv: str, env: dict | None = None, cwd=None, input: str | None = None,
             timeout: float | None = None) -> subprocess.CompletedProcess:
    """``envbuild ARGV`` in-process; ``timeout`` is accepted for a subprocess's signature."""
    del timeout
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    runner = CliRunner()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        with runner.isolation(input=input) as streams:
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as exc:  # a command that exits with its own code (the console script's sys.exit)
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            out, err = streams[0].getvalue(), streams[1].getvalue()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["envbuild", *argv], rc, out.decode(errors="replace"),
                                       err.decode(errors="replace"))
