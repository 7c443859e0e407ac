"""One meaning per flag across commands, JSON Lines from provision, and shell completion.

- ``-i`` is ``--identity`` (an SSH private key) everywhere; an inventory is ``--inventory``.
- ``-t`` is ``--target``; RECIPE is positional in every command that takes one (provision keeps
  ``--recipe``/``-r`` as an alias).
- ``provision --json`` prints JSON Lines: events, then one ``{"type": "result"}`` line.
- ``_ENVBUILD_COMPLETE=bash_source envbuild`` completes the shipped recipe and target names,
  checked in a real bash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from support.clirun import envbuild as run_envbuild
from envbuild.cli import _register, cli
from envbuild.recipes import recipe_names
from envbuild.targets import target_names

BIN = str(Path(sys.executable).parent)


def envbuild(*args: str, home: Path | None = None, env: dict | None = None, timeout: int = 300):
    """``envbuild ARGS`` in this process (tests/support/clirun.py), as a subprocess would see it."""
    full = {**os.environ, **({"ENVBUILD_HOME": str(home)} if home else {}), **(env or {})}
    return run_envbuild(*args, env=full)


def commands() -> dict[str, click.Command]:
    _register()
    return dict(cli.commands)


def test_each_short_flag_has_one_meaning_across_commands():
    meanings: dict[str, set[str]] = {}
    for name, cmd in commands().items():
        for p in cmd.params:
            if isinstance(p, click.Option):
                longs = [o for o in p.opts if o.startswith("--")]
                for short in (o for o in p.opts + p.secondary_opts if len(o) == 2):
                    meanings.setdefault(short, set()).update(longs)
                    assert longs, f"{name}: {short} has no long form"
    assert meanings["-i"] == {"--identity"}, meanings["-i"]
    assert meanings["-t"] == {"--target"}, meanings["-t"]
    assert meanings["-o"] <= {"--output", "--out"}, meanings["-o"]
    for short, longs in meanings.items():
        assert len(longs) == 1 or short == "-o", f"{short} means {sorted(longs)}"
    # one spelling: every -o is --output first (help shows it); --out only as an old alias
    for name, cmd in commands().items():
        for p in cmd.params:
            if isinstance(p, click.Option) and "-o" in p.opts:
                assert [o for o in p.opts if o.startswith("--")][0] == "--output", (name, p.opts)


def test_each_command_is_found_in_the_module_the_table_names():
    """main() imports only the module COMMANDS names for the command it runs: a command missing
    from the table, or named with the wrong module, would not exist when run by name."""
    from envbuild import cli as cli_pkg

    code = ("import sys, envbuild.cli as c; c._register(sys.argv[1:]); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('envbuild.cli.') and m.endswith('_cmd'))), "
            "'|', ' '.join(sorted(c.cli.commands)))")
    registered = commands()
    assert set(cli_pkg.COMMANDS) == set(registered)
    for name, module in cli_pkg.COMMANDS.items():
        p = subprocess.run([sys.executable, "-c", code, name, "--help"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        modules, names = (part.split() for part in p.stdout.strip().split("|"))
        assert modules == [f"envbuild.cli.{module}"], (name, modules)  # only its own module
        assert name in names, (name, names)


@pytest.mark.parametrize("argv", [["--help"], ["--help", "provision"], ["-h", "launch"], ["--debug", "--help"]])
def test_the_groups_help_lists_every_command(argv):
    """Whatever follows it, --help before the command shows the group's help: every command."""
    code = "import sys, envbuild.cli as c; sys.exit(c.main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    listed = p.stdout.split("Commands:", 1)[1]
    from envbuild import cli as cli_pkg
    missing = [name for name in cli_pkg.COMMANDS if f"  {name} " not in listed and f"  {name}\n" not in listed]
    assert not missing, (argv, missing, listed)


COMPLETED = ("provision", "check", "plan", "lock", "show", "render", "launch", "verify")


def test_recipe_is_positional_wherever_a_command_takes_one():
    for name, cmd in commands().items():
        for p in cmd.params:
            if p.name == "recipe":
                assert isinstance(p, click.Argument), f"{name}: RECIPE should be an argument"
            if name in COMPLETED and (p.name == "recipe" or "--target" in getattr(p, "opts", [])):
                assert p._custom_shell_complete is not None, f"{name}: {p.name} has no completion"


def test_identity_refuses_an_inventory_in_every_command(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.2}\n")
    for args in (["provision", "--target", "local", "--dry-run"], ["facts", "--hosts", "127.0.0.2"],
                 ["verify", "--hosts", "127.0.0.2"]):
        p = envbuild(*args, "-i", str(inventory), home=tmp_path / "home")
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "not an SSH private key" in p.stderr and "--inventory" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_provision_inventory_has_no_short_form():
    (cmd,) = [c for n, c in commands().items() if n == "provision"]
    inv = next(p for p in cmd.params if p.name == "inventory")
    assert inv.opts == ["--inventory"]


def test_provision_recipe_positional_or_option_but_not_two(tmp_path):
    home = tmp_path / "home"
    a = envbuild("provision", "cpu-reference", "--target", "local", "--prefix", str(tmp_path / "a"),
                 "--wheelhouse", "/opt/wheels", "--dry-run", "--json", home=home)
    b = envbuild("provision", "--recipe", "cpu-reference", "--target", "local", "--prefix", str(tmp_path / "a"),
                 "--wheelhouse", "/opt/wheels", "--dry-run", "--json", home=home)
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    plans = [json.loads(p.stdout.splitlines()[-1])["plans"] for p in (a, b)]
    assert plans[0]["local"]["recipe"] == plans[1]["local"]["recipe"] == "cpu-reference"
    c = envbuild("provision", "cpu-reference", "--recipe", "alpa-megatron", "--target", "local", "--dry-run",
                 home=home)
    assert c.returncode == 2 and "two recipes given" in c.stderr, c.stderr


@pytest.mark.integration
def test_provision_json_is_json_lines_events_then_result(tmp_path):
    # alpa-megatron on this GPU-less machine: refused by preflight (an event), then the result
    p = envbuild("provision", "alpa-megatron", "--target", "local", "--prefix", str(tmp_path / "env"),
                 "--no-smoke", "--json", home=tmp_path / "home")
    assert p.returncode == 1, p.stderr
    lines = p.stdout.splitlines()
    objs = [json.loads(line) for line in lines]  # every line one JSON object
    assert all(isinstance(o, dict) for o in objs)
    assert [o["type"] for o in objs] == ["event"] * (len(objs) - 1) + ["result"]
    events, result = objs[:-1], objs[-1]
    assert {"host": "local", "step": "preflight", "kind": "failed"}.items() <= events[0].items()
    assert result["exit_code"] == 1 and result["results"]["local"]["status"] == "refused"
    stored = [json.loads(x) for x in (Path(result["run_dir"]) / "events.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in e.items() if k != "type"} for e in events] == stored


def completions(*words: str) -> list[str]:
    """What bash offers after ``envbuild WORDS`` (the last word is being completed), in a real
    bash with envbuild's completion script sourced."""
    line = " ".join(words)
    script = ('eval "$(_ENVBUILD_COMPLETE=bash_source envbuild)"; '
              f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _envbuild_completion envbuild; "
              'printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"})
    assert p.returncode == 0, p.stderr
    return [x for x in p.stdout.splitlines() if x]


@pytest.mark.process
def test_bash_completion_script_is_emitted():
    p = subprocess.run([f"{BIN}/envbuild"], env={**os.environ, "_ENVBUILD_COMPLETE": "bash_source"},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "_envbuild_completion" in p.stdout and "complete " in p.stdout


def offered(*words: str) -> list[str]:
    """click's completions after ``envbuild WORDS`` (the last word is being completed), in-process."""
    from click.shell_completion import ShellComplete

    _register()
    comp = ShellComplete(cli, {}, "envbuild", "_ENVBUILD_COMPLETE")
    return [c.value for c in comp.get_completions(list(words[:-1]), words[-1])]


def test_every_command_completes_shipped_recipe_and_target_names():
    recipes, targets = sorted(recipe_names()), sorted(target_names())
    assert "cpu-reference" in recipes and len(recipes) >= 6 and {"local", "azure-nd96"} <= set(targets)
    for cmd in ("provision", "check", "plan", "lock", "show", "render", "launch"):
        assert sorted(offered(cmd, "")) == recipes, cmd
    for cmd in ("provision", "check", "plan", "lock", "render", "launch", "verify"):
        assert sorted(offered(cmd, "--target", "")) == targets, cmd
    assert offered("recipes", "me") == ["megatron-deepspeed-slurm", "megatron-deepspeed-slurm-h100", "megatronapp",
                                        "megatronapp-h100"]
    assert offered("provision", "-r", "cpu") == ["cpu-reference"]


@pytest.mark.process
def test_bash_completes_recipe_and_target_names():
    # the documented script, sourced in a real bash
    assert sorted(completions("envbuild", "provision", "''")) == sorted(recipe_names())
    assert completions("envbuild", "check", "cpu-reference", "-t", "az") == ["azure-nd96"]


@pytest.mark.process
def test_completion_of_a_path_asks_the_shell_for_files(tmp_path):
    # click's protocol: "type,value" lines; "file" makes bash complete file names itself
    env = {**os.environ, "_ENVBUILD_COMPLETE": "bash_complete", "COMP_WORDS": f"envbuild show {tmp_path}/mi",
           "COMP_CWORD": "2"}
    p = subprocess.run([f"{BIN}/envbuild"], env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines() == [f"file,{tmp_path}/mi"], p.stdout + p.stderr


def test_other_json_outputs_are_one_document_each(tmp_path):
    # only provision streams (JSON Lines); every other --json prints one document, messages to stderr
    for args in (["recipes"], ["show", "cpu-reference"], ["check", "cpu-reference", "-t", "local"],
                 ["plan", "cpu-reference", "-t", "local"], ["lock", "cpu-reference", "-t", "local", "--check"],
                 ["launch", "cpu-reference", "-t", "local", "--scheduler", "local"]):
        p = envbuild(*args, "--json", home=tmp_path / "home")
        assert p.returncode == 0, (args, p.stderr)
        json.loads(p.stdout)  # the whole of stdout is one JSON value
