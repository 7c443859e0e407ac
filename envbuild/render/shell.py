"""Primitive actions -> POSIX shell commands: the one translation every text renderer shares.

The Dockerfile's RUN bodies, the Apptainer ``%post`` and ``%test`` sections, the plain
``run.sh`` and the image's ``verify.sh`` all come from here. Pure: actions in, text out.

Every value from an action is shell-quoted (``shlex.quote``); nothing from a recipe, lock or
facts is ever expanded by the shell. File contents are data: a quoted heredoc (``<<'DELIM'``)
with a delimiter that does not occur in the content, so ``$HOME`` or a backquote in a file
stays as written.

Where envbuild's own files live at run time (smoke scripts, the patch tool, patch specs) is
the renderer's choice, given as ``Where``; ``shipped(actions)`` lists what must be placed
there.

    >>> from envbuild.actions.model import Run
    >>> commands([Run(argv=["pip", "install", "a b"], env={"X": "1"}, cwd="/src")], Where("/f"))
    ["(cd /src && env X=1 pip install 'a b')"]
"""

from __future__ import annotations

import json
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

PATCH_TOOL = "tools/textpatch.py"  # envbuild/node/textpatch.py, run as a script


@dataclass(frozen=True)
class Where:
    """Where the renderer puts envbuild's shipped files at run time.

    ``files`` is a shell word (already quoted, or an expression such as ``"$FILES"``);
    ``python`` runs envbuild's stdlib-only tools (the patch tool).
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


def git_checkout(a: GitCheckout) -> list[str]:
    """Clone (or reuse a clone), fetch the pinned commit when absent, check it out detached
    and verify HEAD; ``url`` recorded as origin."""
    d = q(a.dest)
    want = a.sha or a.ref
    out = [f"if [ ! -d {q(a.dest + '/.git')} ]; then git clone --quiet --no-checkout -- "
           f"{q(a.fetch_url)} {d}; fi"]
    if a.sha:
        out.append(f"{{ git -C {d} cat-file -e {q(a.sha + '^{commit}')} 2>/dev/null || "
                   f"git -C {d} fetch --quiet origin -- {q(a.sha)}; }}")
        out.append(f"git -C {d} -c advice.detachedHead=false checkout --quiet --force {q(a.sha)}")
        out.append(f'{{ test "$(git -C {d} rev-parse HEAD)" = {q(a.sha)} || '
                   f"{{ echo {q(f'{a.dest}: HEAD is not {a.sha}')} >&2; exit 1; }}; }}")
    else:  # a ref without a pinned commit (an unlocked plan): branch or tag
        out.append(f"{{ git -C {d} -c advice.detachedHead=false checkout --quiet --force "
                   f"{q('origin/' + want)} 2>/dev/null || "
                   f"git -C {d} -c advice.detachedHead=false checkout --quiet --force {q(want)}; }}")
    if a.url != a.fetch_url:
        out.append(f"git -C {d} remote set-url origin {q(a.url)}")
    for path in a.submodules:  # submodules the build reads, from the mirror when one is given
        opts = "".join(f"-c {q('url.' + mirror + '.insteadOf=' + url)} "
                       for url, mirror in sorted(a.submodule_mirrors.items()))
        allow = "-c protocol.file.allow=always " if a.submodule_mirrors else ""
        out.append(f"git -C {d} {allow}{opts}submodule update --init -- {q(path)}")
    return out


def patch_spec_name(a: ApplyPatch) -> str:
    return f"patch-specs/{a.spec['id']}.json"


def patch_spec_text(a: ApplyPatch) -> str:
    return json.dumps(a.spec, indent=2, sort_keys=True) + "\n"


def apply_patch(a: ApplyPatch, where: Where) -> str:
    return " ".join([where.python, where.file(PATCH_TOOL), "--spec", where.file(patch_spec_name(a)),
                     "--dest", q(a.dest), "--diff-dir", q(a.diff_dir)])


def build_wheel(a: BuildWheel, given: frozenset[str] = frozenset()) -> list[str]:
    return [f"mkdir -p {q(a.outdir)}", argv_line(a.argv, a.env, a.path, a.cwd, given)]


def capture(a: Capture) -> list[str]:
    """Run with the env file sourced; stdout/stderr/exit status in ``<dir>/<name>.*``.
    Never stops the script: ``capture_failures()`` reports after every capture ran."""
    base = f"{a.dir.rstrip('/')}/{a.name}"
    env_file = a.env_file or "/nonexistent"
    body = (f"cd {q(a.cwd)} && if [ -f {q(env_file)} ]; then . {q(env_file)}; fi && "
            + argv_line(["timeout", str(a.timeout), *a.argv], a.env))
    # a script handed to an inner shell (bash -c '...') is single-quoted on purpose: the inner
    # shell expands its $ expressions (SC2016 would ask for double quotes)
    inner = " disable=SC2016" if any("$" in word for word in a.argv) else ""
    return [f"mkdir -p {q(a.dir)}",
            "rc=0",
            f"# shellcheck source=/dev/null{inner}",
            f"({body}) > {q(base + '.out')} 2> {q(base + '.err')} || rc=$?",
            f"echo \"$rc\" > {q(base + '.rc')}",
            f"if [ \"$rc\" != 0 ]; then failed=\"$failed {a.name}(exit $rc)\"; "
            f"echo {q(a.name + ' failed, see ' + base + '.err')} >&2; fi"]


def capture_failures(what: str = "smoke") -> str:
    return f'if [ -n "$failed" ]; then echo "{what} failed:$failed" >&2; exit 1; fi'


def commands(actions: list, where: Where) -> list[str]:
    """Shell commands for ``actions``, in order, one per list item. Every item except a
    capture's is one command (a ``||`` inside is grouped in braces), so items can be run one
    per line under ``set -e`` or joined with ``&&``. Captures set ``rc`` and append to
    ``failed`` (set it to '' before the first): see ``capture_failures``."""
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
        elif isinstance(a, GitCheckout):
            out.extend(git_checkout(a))
        elif isinstance(a, ApplyPatch):
            out.append(apply_patch(a, where))
        elif isinstance(a, BuildWheel):
            out.extend(build_wheel(a, where.build_args))
        elif isinstance(a, Capture):
            out.extend(capture(a))
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
        elif isinstance(a, ApplyPatch):
            out[PATCH_TOOL] = NODE / "textpatch.py"
            out[patch_spec_name(a)] = patch_spec_text(a)
    return out
