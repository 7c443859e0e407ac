"""Where a recipe's native run leaves its training output, and the shell that captures it. Pure.

A recipe's ``benchmark.command`` is what the authors ran. Two published scripts do not leave
the training output on their own stdout, and the table below says so, row by row, with the
script that does it:

* ``output_file``: the script sends the training output into a file of its working folder
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

``capture(recipe, variant, command)`` returns the shell text for any command; a command with
no row comes back unchanged. Used by the smoke step's native run (``envbuild.smoke.onnode``)
and by ``envbuild launch`` (``envbuild.launch.job``), so both run the same text.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

MARK = "envbuild: the training output is in"


@dataclass(frozen=True)
class Capture:
    """How the training output of one recipe command is taken (``variant`` None: ``command``)."""

    recipe: str
    variant: str | None
    output_file: str | None = None  # relative to the command's working folder
    log_index: str | None = None  # a file (working folder) the script appends its log's path to
    backgrounds: bool = False  # the script ends with `training &`: source it, wait for the job
    source: str = ""
    why: str = ""


CAPTURES: tuple[Capture, ...] = (
    Capture("megatronapp", None, output_file="trace_pipeline_4_model_chunks_4.txt",
            source="OpenSQZ/MegatronApp@1bed2a7202162d6eb2725e9769632a682021a6fb:run_single.sh",
            why="run_single.sh runs `bash script/benchmark.sh train "
                ">trace_pipeline_${PIPELINE_PARALLEL}_model_chunks_${MODEL_CHUNKS}.txt`; with "
                "--pipeline_parallel 4 --model_chunks 4 the training output is in that file, not on stdout"),
    Capture("polaris-megatron-deepspeed", None, backgrounds=True, log_index="logfiles",
            source="argonne-lcf/Megatron-DeepSpeed@e4bac7019db92cfe49d6eeac00b5721652e516fe:ALCF/train-gpt3.sh "
                   "and ALCF/launch.sh (elasticDistributed)",
            why="train-gpt3.sh ends with `elasticDistributed \"$@\" 2>&1 &`: mpiexec runs in the "
                "background and the script exits 0 at once; launch.sh's elasticDistributed sends the "
                "training output to $OUTPUT_LOG (outputs/.../logs/<user>-<host>-nhosts<N>-ngpu<G>-<stamp>.log) "
                "and appends that path to logfiles; stdout holds only the scripts' echo lines"),
)


def row(recipe: str, variant: str | None) -> Capture | None:
    """The capture row of ``recipe``'s command ``variant`` (None: the command prints its output)."""
    return next((c for c in CAPTURES if c.recipe == recipe and c.variant == variant), None)


def capture(recipe: str, variant: str | None, command: str) -> str:
    """Shell text that runs ``command`` so that its training output is on stdout and its exit
    status is the training's (see the module docstring); ``command`` unchanged without a row.

    >>> print(capture("polaris-megatron-deepspeed", None, "./ALCF/train-gpt3.sh"))
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
    c = row(recipe, variant)
    if c is None:
        return command
    text = command
    if c.backgrounds:
        words = shlex.split(command)
        if not words or not ("/" in words[0] or words[0].endswith(".sh")):
            raise ValueError(f"{recipe}: a backgrounding command must start with its script, got {command!r}")
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
    if c.output_file:
        f = shlex.quote(c.output_file)
        text = _run_then([
            f"# the command writes its training output into {c.output_file}: a stale copy is removed,",
            "# the file is printed after the command",
            f"rm -f -- {f}"], text, [
            f"if [ -f {f} ]; then echo {shlex.quote(f'{MARK} {c.output_file}:')}; cat -- {f}; "
            f"else echo {shlex.quote(f'envbuild: {c.output_file} was not written')} >&2; fi"])
    return text


def _run_then(before: list[str], text: str, after: list[str]) -> str:
    """``before``, then ``text`` with its exit status kept, then ``after``, then that status."""
    return "\n".join([*before, "envbuild_rc=0", f"{text} || envbuild_rc=$?", *after, 'exit "$envbuild_rc"'])
