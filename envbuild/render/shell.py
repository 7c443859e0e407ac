"""Primitive actions -> POSIX shell commands: the one translation every text renderer shares.

The Dockerfile's RUN bodies, the Apptainer ``%post`` and ``%test`` sections, the plain
``run.sh`` and the image's ``verify.sh`` all come from here. Pure: actions in, text out.

Every value from an action is shell-quoted (``shlex.quote``); nothing from a recipe, lock or
facts is ever expanded by the shell. File contents are data: a quoted heredoc (``<<'DELIM'``)
with a delimiter that does not occur in the content, so ``$HOME`` or a backquote in a file
stays as written.

What a node carries out (check out a commit, apply a patch, build a wheel, capture a run) is
not written as shell here: the node tool does it with the functions Ansible's module runs
(``envbuild/node/__main__.py``), and the command only quotes its argv,

    PYTHON <files>/envbuild_node <files>/actions/<name>.json

the action itself shipped as that file. Where envbuild's own files live at run time (smoke
scripts, the node tool, action files) is the renderer's choice, given as ``Where``;
``shipped(actions)`` lists what must be placed there.

    >>> from envbuild.actions.model import Run
    >>> commands([Run(argv=["pip", "install", "a b"], env={"X": "1"}, cwd="/src")], Where("/f"))
    ["(cd /src && env X=1 pip install 'a b')"]
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from envbuild.actions.assets import asset_path
from envbuild.fsio import sha256_text
from envbuild.shipped import NODE
from envbuild.actions.steps import home_word
from envbuild.actions.model import (ApplyPatch, BuildWheel, Capture, CopyAsset, GitCheckout,
                                    MakeDir, Run, WriteFile)



def q(value: str) -> str:
    """``shlex.quote``, but a value holding single quotes and nothing a double-quoted word
    expands (``$ ` \\ ! "``) is double-quoted, which reads better than ``'"'"'``; a path that
    starts with ``~/`` (a prefix under the user's home, as Polaris's) keeps meaning the home
    folder: ``"$HOME"/...`` (the shell expands no ``~`` inside quotes).

    >>> print(q("~/.envbuild/envs/x y"), q("/opt/a b"))
    "$HOME"/'.envbuild/envs/x y' '/opt/a b'
    """
    home = home_word(value)
    if home:
        return home
    if "'" in value and not any(c in value for c in '$`\\!"'):
        return '"' + value + '"'
    return shlex.quote(value)

# The node tool: the files of envbuild/node/ that its actions need, run as one folder
# (python3 <files>/envbuild_node ACTION.json: its __main__.py loads the folder as the package).
# tests/node/test_node_package.py checks that these are every file actions.py imports.
NODE_TOOL = "envbuild_node"
NODE_TOOL_FILES = ("__init__.py", "__main__.py", "actions.py", "textpatch.py")
TOOL_ACTIONS = (GitCheckout, ApplyPatch, BuildWheel, Capture)  # what the node tool runs
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Where:
    """Where the renderer puts envbuild's shipped files at run time.

    ``files`` is a shell word (already quoted, or an expression such as ``"$FILES"``);
    ``python`` (a path or a command name, quoted where used) runs envbuild's stdlib-only node
    tool: a Python of the package's floor or newer where the tool's actions run.
    """

    files: str
    python: str = "python3"
    # variables of CAPPED_BY_CORES the build may set itself (a Dockerfile's ARG): when set and
    # not empty, the given value is used as it is; otherwise the capped planned value
    build_args: frozenset[str] = frozenset()

    def file(self, rel: str) -> str:
        """A shell word for ``<files>/<rel>`` (``rel`` is envbuild's own relative name)."""
        if self.files.startswith('"') and self.files.endswith('"'):
            return self.files[:-1] + "/" + rel + '"'
        return self.files + "/" + q(rel)


def heredoc_delimiter(content: str) -> str:
    """A delimiter that is not a line of ``content`` (content-derived, so output is stable)."""
    lines = set(content.splitlines())
    n = 0
    while True:
        delim = "ENVBUILD_EOF_" + sha256_text(f"{n}:{content}")[:12]
        if delim not in lines:
            return delim
        n += 1


# Build parallelism the planner sized for the target's cores and memory (envbuild.patches.apex_build):
# a script or image build may run on a smaller machine (a 4-core CI runner building the image of a
# 96-core target), so the rendered value is the planned one or the builder's core count, the lower.
# A Dockerfile makes it a build argument (Where.build_args): `--build-arg MAX_JOBS=N` sets it.
CAPPED_BY_CORES = frozenset({"MAX_JOBS"})


def env_words(env: dict[str, str], path: list[str], given: frozenset[str] = frozenset()) -> list[str]:
    """``K=V`` words for ``env`` (values quoted) plus ``PATH=<dirs>:"$PATH"`` for ``path``;
    a variable of CAPPED_BY_CORES in ``given`` keeps the value the build set, when not empty.

    >>> env_words({"MAX_JOBS": "96", "X": "a b"}, [])
    ['MAX_JOBS="$(( $(nproc) < 96 ? $(nproc) : 96 ))"', "X='a b'"]
    >>> env_words({"MAX_JOBS": "96"}, [], frozenset({"MAX_JOBS"}))
    ['MAX_JOBS="${MAX_JOBS:-$(( $(nproc) < 96 ? $(nproc) : 96 ))}"']
    """
    words = []
    for k, v in env.items():
        if not k.replace("_", "a").isalnum() or k[:1].isdigit():
            raise ValueError(f"not a POSIX variable name: {k!r}")
        if k in CAPPED_BY_CORES and str(v).isdigit():
            capped = f"$(( $(nproc) < {v} ? $(nproc) : {v} ))"
            words.append(f'{k}="${{{k}:-{capped}}}"' if k in given else f'{k}="{capped}"')
            continue
        words.append(f"{k}={q(str(v))}")
    if path:
        words.append("PATH=" + q(":".join(path)) + ':"$PATH"')
    return words


def build_arg_check(name: str) -> str:
    """A command that stops the build when the build argument ``name`` is set to anything but
    a positive whole number (empty or unset: the capped planned value)."""
    return (f'case "${{{name}:-1}}" in *[!0-9]*|0*) echo "--build-arg {name}=${{{name}}}: not a positive '
            f'whole number (leave it unset: the build machine cores, at most the planned value)" >&2; exit 2;; esac')


def argv_line(argv: list[str], env: dict[str, str] | None = None, path: list[str] | None = None,
              cwd: str | None = None, given: frozenset[str] = frozenset()) -> str:
    """``(cd CWD && env K=V ... argv)``; only the parts that are needed."""
    words = env_words(env or {}, path or [], given)
    line = " ".join((["env", *words] if words else []) + [q(a) for a in argv])
    return f"(cd {q(cwd)} && {line})" if cwd else line


def write_file(path: str, content: str, perm: str = "0644") -> str:
    """One command (with a heredoc body) that writes ``content`` exactly to ``path``."""
    parent = q(str(Path(path).parent))
    if content == "":
        return f"mkdir -p {parent} && : > {q(path)} && chmod {q(perm)} {q(path)}"
    if not content.endswith("\n"):  # a heredoc always ends with a newline: printf is exact
        return f"mkdir -p {parent} && printf '%s' {q(content)} > {q(path)} && chmod {q(perm)} {q(path)}"
    delim = heredoc_delimiter(content)
    return (f"mkdir -p {parent} && cat > {q(path)} <<'{delim}' && chmod {q(perm)} {q(path)}\n"
            f"{content}{delim}")


def action_name(a) -> str:
    """The shipped file of an action the node tool runs, named for what it makes, which is one
    per plan: the tree's folder, the patch's id, the wheel's folder (its cache key), the run."""
    if isinstance(a, GitCheckout):
        label = "git-" + Path(a.dest).name
    elif isinstance(a, ApplyPatch):
        label = "patch-" + str(a.spec["id"])
    elif isinstance(a, BuildWheel):
        label = "wheel-" + Path(a.outdir).name
    else:
        label = "capture-" + a.name
    return "actions/" + re.sub(r"[^A-Za-z0-9._-]", "_", label) + ".json"


def sized_here(a) -> dict[str, str]:
    """The action's variables of CAPPED_BY_CORES: set by the command line (``env_words``: the
    machine the render runs on sizes them), left out of its file."""
    return {k: v for k, v in getattr(a, "env", {}).items() if k in CAPPED_BY_CORES and str(v).isdigit()}


def action_text(a) -> str:
    """The action's file: the action as the node tool reads it (Ansible's module gets the same)."""
    data = a.model_dump(mode="json")
    if sized_here(a):
        data["env"] = {k: v for k, v in data["env"].items() if k not in sized_here(a)}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def node_tool(a, where: Where) -> str:
    """``[env K=V] PYTHON <files>/envbuild_node <files>/actions/<name>.json``."""
    words = env_words(sized_here(a), [], where.build_args)
    return " ".join((["env", *words] if words else [])
                    + [q(where.python), where.file(NODE_TOOL), where.file(action_name(a))])


def capture(a: Capture, where: Where) -> str:
    """The node tool runs ``a`` (outputs in ``<dir>/<name>.out|.err|.rc``); a failure never stops
    the script: its name and exit status are added to ``failed``, and ``capture_failures()``
    reports after every capture ran."""
    name = a.name if SAFE_NAME.fullmatch(a.name) else '"' + q(a.name) + '"'
    return f'{node_tool(a, where)} || failed="$failed {name}(exit $?)"'


def capture_failures(what: str = "smoke") -> str:
    return f'if [ -n "$failed" ]; then echo "{what} failed:$failed" >&2; exit 1; fi'


def commands(actions: list, where: Where) -> list[str]:
    """Shell commands for ``actions``, in order, one per list item. Every item but a capture's
    is one command (a ``||`` inside is grouped in braces), so items can be run one per line
    under ``set -e`` or joined with ``&&``; a capture's (``TOOL || failed=...``) is for a script
    that runs one item per line, where it appends to ``failed`` (set it to '' before the first):
    see ``capture_failures``. Checkouts, patches, wheel builds and captures are node tool
    commands (the module docstring)."""
    out: list[str] = []
    for a in actions:
        if isinstance(a, Run):
            line = argv_line(a.argv, a.env, a.path, a.cwd, where.build_args)
            if a.stdout:
                out.append(f"mkdir -p {q(str(Path(a.stdout).parent))}")
                line += f" > {q(a.stdout)}"
            out.append(line)
        elif isinstance(a, WriteFile):
            out.append(write_file(a.path, a.content, a.perm))
        elif isinstance(a, MakeDir):
            out.append(f"mkdir -p {q(a.path)}")
        elif isinstance(a, CopyAsset):
            out.append(f"mkdir -p {q(str(Path(a.dest).parent))} && "
                       f"cp {where.file('assets/' + a.asset)} {q(a.dest)} && chmod {q(a.perm)} {q(a.dest)}")
        elif isinstance(a, Capture):
            out.append(capture(a, where))
        elif isinstance(a, TOOL_ACTIONS):
            out.append(node_tool(a, where))
        else:  # pragma: no cover - every op of envbuild.actions.model is handled above
            raise ValueError(f"no shell translation for action {a!r}")
    return out


def shipped(actions: list) -> dict[str, str | Path]:
    """Files that ``commands(actions, where)`` expects under ``where.files``:
    ``{relative name: text (generated) or Path (one of envbuild's own files)}``."""
    out: dict[str, str | Path] = {}
    for a in actions:
        if isinstance(a, CopyAsset):
            out["assets/" + a.asset] = asset_path(a.asset)
        elif isinstance(a, TOOL_ACTIONS):
            out.update({f"{NODE_TOOL}/{name}": NODE / name for name in NODE_TOOL_FILES})
            out[action_name(a)] = action_text(a)
    return out


def copied(names) -> list[str]:
    """The shipped ``names`` as what a build copies: the node tool as its one folder
    (``envbuild_node/``), every other file by itself."""
    tool = [f"{NODE_TOOL}/"] if any(n.startswith(NODE_TOOL + "/") for n in names) else []
    return tool + [n for n in names if not n.startswith(NODE_TOOL + "/")]


def ship_into(files: dict, names: dict, prefix: str = "") -> None:
    """Add ``shipped()`` items to a render's ``files`` under ``prefix``; a name that already holds
    other content is refused (two actions of one render named alike would run one of them twice)."""
    for rel, item in names.items():
        if files.get(prefix + rel, item) != item:
            raise ValueError(f"two shipped files named {prefix + rel}")
        files[prefix + rel] = item
