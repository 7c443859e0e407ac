"""The shell that captures a published command's training output where the script leaves it. Pure.

A recipe's ``benchmark.command`` is what the authors ran. Two published scripts do not leave
the training output on their own stdout; the recipe says so in its run's ``output``
(``envbuild.recipes.schema.RunOutput``), with the script that does it:

* ``file``: the script sends the training output into a file of its working folder
  (MegatronApp's ``run_single.sh``: ``bash script/benchmark.sh train >trace_pipeline_4_model_chunks_4.txt``).
  The capture removes a stale copy first (a file left by an earlier run is never read as this
  one's), runs the command, then prints the file on stdout after a marker line, so the run's
  ``.out`` (smoke) or the job's output file (launch) holds it and the recipe's parser reads it.
* ``log_index``: the script writes the training output into a log file of its own naming and
  appends that file's path to an index file of its working folder (ALCF's ``launch.sh`` at the
  pinned commit: ``OUTPUT_LOG=${OUTPUT_DIR}/logs/$USER-$HOST-nhosts<N>-ngpu<G>-$TSTAMP.log``,
  ``echo "${OUTPUT_LOG}" >> "${PARENT}/logfiles"``, ``launchJob "$@" >> "${OUTPUT_LOG}" 2>&1``).
  The capture counts the index's lines before the command and prints the log named by the
  first new line after it (an entry left by an earlier run is never read as this one's).
* ``backgrounds``: the script starts training with ``&`` as its last command and returns at
  once (ALCF's ``train-gpt3.sh``: ``elasticDistributed "$@" 2>&1 &``), so a caller would
  collect an empty output and a success. The capture sources the script in a subshell (the
  background job becomes the subshell's own), waits for that job and exits with its status;
  the training's stdout and stderr are the subshell's.

``capture(output, command)`` returns the shell text for any command; a command whose run
says nothing of its output comes back unchanged. Used by the smoke step's native run (``envbuild.plan.smoke``)
and by ``envbuild launch`` (``envbuild.launch.job``), so both run the same text.
"""

from __future__ import annotations

import shlex

from envbuild.recipes.schema import RunOutput

MARK = "envbuild: the training output is in"


def capture(c: RunOutput | None, command: str) -> str:
    """Shell text that runs ``command`` so that its training output is on stdout and its exit
    status is the training's (see the module docstring); ``command`` unchanged when ``c`` is None.

    >>> out = RunOutput(backgrounds=True, log_index="logfiles", source="s", why="w")
    >>> print(capture(out, "./ALCF/train-gpt3.sh"))
    # the training output goes to a log the script names and appends to logfiles: the
    # log named by the first new line of the index is printed after the command
    envbuild_seen=$(wc -l 2>/dev/null < logfiles || echo 0)
    envbuild_rc=0
    # train-gpt3.sh starts training in the background and returns: sourced, then its job is awaited
    ( set +euo pipefail
      # shellcheck source=/dev/null
      . ./ALCF/train-gpt3.sh
      status=$?
      job="${!:-}"
      if [ -z "$job" ]; then exit "$status"; fi
      wait "$job"; status=$?
      wait
      exit "$status" ) || envbuild_rc=$?
    envbuild_log=$(tail -n +"$((envbuild_seen + 1))" logfiles 2>/dev/null | head -n 1)
    if [ -n "$envbuild_log" ] && [ -f "$envbuild_log" ]; then
      echo 'envbuild: the training output is in' "$envbuild_log:"
      cat -- "$envbuild_log"
    else
      echo 'envbuild: the command named no new log in logfiles' >&2
    fi
    exit "$envbuild_rc"
    """
    if c is None:
        return command
    text = command
    if c.backgrounds:
        words = shlex.split(command)
        if not words or not ("/" in words[0] or words[0].endswith(".sh")):
            raise ValueError(f"a backgrounding command must start with its script, got {command!r}")
        name = words[0].rsplit("/", 1)[-1]
        text = "\n".join([
            f"# {name} starts training in the background and returns: sourced, then its job is awaited",
            "( set +euo pipefail",
            "  # shellcheck source=/dev/null",
            f"  . {command}",
            "  status=$?",
            '  job="${!:-}"',
            '  if [ -z "$job" ]; then exit "$status"; fi',
            '  wait "$job"; status=$?',
            "  wait",
            '  exit "$status" )'])
    if c.log_index:
        index = shlex.quote(c.log_index)
        text = _run_then([
            f"# the training output goes to a log the script names and appends to {c.log_index}: the",
            "# log named by the first new line of the index is printed after the command",
            f"envbuild_seen=$(wc -l 2>/dev/null < {index} || echo 0)"], text, [
            f'envbuild_log=$(tail -n +"$((envbuild_seen + 1))" {index} 2>/dev/null | head -n 1)',
            'if [ -n "$envbuild_log" ] && [ -f "$envbuild_log" ]; then',
            f"  echo {shlex.quote(MARK)} \"$envbuild_log:\"",
            '  cat -- "$envbuild_log"',
            "else",
            f"  echo {shlex.quote(f'envbuild: the command named no new log in {c.log_index}')} >&2",
            "fi"])
    if c.file:
        f = shlex.quote(c.file)
        text = _run_then([
            f"# the command writes its training output into {c.file}: a stale copy is removed,",
            "# the file is printed after the command",
            f"rm -f -- {f}"], text, [
            f"if [ -f {f} ]; then echo {shlex.quote(f'{MARK} {c.file}:')}; cat -- {f}; "
            f"else echo {shlex.quote(f'envbuild: {c.file} was not written')} >&2; fi"])
    return text


def _run_then(before: list[str], text: str, after: list[str]) -> str:
    """``before``, then ``text`` with its exit status kept, then ``after``, then that status."""
    return "\n".join([*before, "envbuild_rc=0", f"{text} || envbuild_rc=$?", *after, 'exit "$envbuild_rc"'])
