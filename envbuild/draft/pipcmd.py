"""Shell command lines as words, and what a pip, setup.py, apt or conda command installs (pure).

Shared by the Dockerfile and README readers: a line ``apt-get update && pip install -r
requirements.txt`` is two commands; each is classified by what it runs.

>>> [c.kind for c in commands("apt-get install -y git && python -m pip install -r req.txt torch==1.8.1")]
['apt', 'pip']
>>> commands("pip install -r req.txt torch==1.8.1")[0].pip.files
('req.txt',)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

from envbuild.draft.requirements import Vcs, vcs_requirement

Kind = Literal["pip", "setup", "apt", "conda", "data", "launch", "other"]
SEPARATORS = {"&&", "||", ";", "|", "&", ";;"}
# options of pip install that take a value (the value is not a requirement)
PIP_VALUED = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target",
              "--prefix", "--root", "--src", "--upgrade-strategy", "--python-version", "--platform",
              "--global-option", "--install-option", "--config-settings", "-C", "--trusted-host",
              "--cache-dir", "--log", "--timeout", "--retries", "--progress-bar", "--no-binary",
              "--only-binary"}
LAUNCHERS = ("deepspeed", "torchrun", "srun", "mpirun", "mpiexec", "accelerate", "sbatch", "qsub")
# programs a README's untagged code block is read as shell for (``looks_like_command``): the
# installers and launchers classified here, and the shell's everyday tools
PROGRAMS = frozenset({
    *LAUNCHERS, "apt", "apt-get", "yum", "dnf", "conda", "mamba", "micromamba", "git", "cd", "export",
    "source", ".", "bash", "sh", "zsh", "make", "cmake", "ninja", "wget", "curl", "mkdir", "cp", "mv", "rm",
    "ln", "tar", "unzip", "gunzip", "ls", "cat", "echo", "chmod", "docker", "singularity", "apptainer",
    "module", "nvidia-smi", "nvcc", "huggingface-cli", "gsutil", "aws", "pytest", "virtualenv", "uv",
})
TRAIN_WORDS = re.compile(r"(^|[/_.-])(train|pretrain|deepy|finetune|run_clm|launch)", re.IGNORECASE)
DATA_WORDS = re.compile(r"(prepare|preprocess|download|tokeni[sz]e|data)", re.IGNORECASE)


@dataclass(frozen=True)
class PipInstall:
    """What one ``pip install`` names: requirement specifiers, ``-r`` files, ``-c`` files,
    ``-e`` targets, VCS requirements, local paths (``.``), and index options as written."""

    requirements: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    editables: tuple[str, ...] = ()
    vcs: tuple[Vcs, ...] = ()
    paths: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """One simple command of a shell line: its words and what it is."""

    words: tuple[str, ...]
    kind: Kind
    pip: PipInstall | None = None
    packages: tuple[str, ...] = field(default=())  # apt / conda package names

    @property
    def text(self) -> str:
        return shlex.join(self.words)


def split_words(line: str) -> list[str]:
    """Shell words of ``line`` with ``&&``, ``;``, ``|`` as words of their own; a line shlex
    cannot read (an open quote) is split on blanks."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = ""  # a '#' inside a word (git+URL#egg=x) is not a comment
        words = list(lexer)
    except ValueError:
        words = line.split()
    cut = next((i for i, w in enumerate(words) if w.startswith("#")), len(words))
    return words[:cut]


def _program(words: list[str]) -> list[str]:
    """``words`` without leading ``VAR=value`` assignments, ``sudo``, ``env`` and ``time``."""
    i = 0
    while i < len(words) and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[i]) or words[i] in
                              ("sudo", "env", "time", "exec", "nohup", "RUN")):
        i += 1
    return words[i:]


def _pip_args(words: list[str]) -> list[str] | None:
    """The arguments after ``install`` of a pip command (``pip``, ``pip3``, ``python -m pip``)."""
    if words and re.fullmatch(r"pip[0-9.]*", words[0].rsplit("/", 1)[-1]):
        rest = words[1:]
    elif len(words) >= 3 and re.fullmatch(r"python[0-9.]*", words[0].rsplit("/", 1)[-1]) \
            and words[1] == "-m" and words[2] == "pip":
        rest = words[3:]
    else:
        return None
    return rest[1:] if rest and rest[0] == "install" else None


def pip_install(args: list[str]) -> PipInstall:
    """What the arguments of ``pip install`` name (see PipInstall)."""
    reqs, files, cons, edits, paths, opts, vcs = [], [], [], [], [], [], []
    i = 0
    while i < len(args):
        word = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        if word in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable"):
            {"-r": files, "--requirement": files, "-c": cons, "--constraint": cons}.get(word, edits).append(value)
            if word in ("-e", "--editable") and (v := vcs_requirement(value)):
                vcs.append(v)
            i += 2
            continue
        if word.startswith(("--requirement=", "--constraint=", "--editable=")):
            key, _, value = word.partition("=")
            {"--requirement": files, "--constraint": cons}.get(key, edits).append(value)
        elif word in PIP_VALUED:
            opts.append(f"{word} {value}")
            i += 2
            continue
        elif word.startswith("-"):
            opts.append(word)
        elif (v := vcs_requirement(word)) is not None:
            vcs.append(v)
        elif word.startswith((".", "/")) or word.endswith((".whl", ".tar.gz", ".zip")):
            paths.append(word)
        else:
            reqs.append(word)
        i += 1
    return PipInstall(tuple(reqs), tuple(files), tuple(cons), tuple(edits), tuple(vcs), tuple(paths), tuple(opts))


def classify(words: list[str]) -> Command:
    """What one simple command is (``pip``, ``setup``, ``apt``, ``conda``, ``data``, ``launch``,
    ``other``)."""
    prog = _program(words)
    name = prog[0].rsplit("/", 1)[-1] if prog else ""
    if (args := _pip_args(prog)) is not None:
        return Command(tuple(words), "pip", pip=pip_install(args))
    if name in ("apt-get", "apt", "yum", "dnf") and "install" in prog:
        pkgs = [w for w in prog[prog.index("install") + 1:] if not w.startswith("-")]
        return Command(tuple(words), "apt", packages=tuple(pkgs))
    if name in ("conda", "mamba", "micromamba") and len(prog) > 1 and prog[1] in ("install", "create"):
        pkgs, rest = [], prog[2:]
        while rest:
            word = rest.pop(0)
            if word in ("-n", "--name", "-c", "--channel", "-p", "--prefix", "-f", "--file"):
                rest = rest[1:]
            elif not word.startswith("-"):
                pkgs.append(word)
        return Command(tuple(words), "conda", packages=tuple(pkgs))
    script = prog[1] if len(prog) > 1 and re.fullmatch(r"python[0-9.]*", name) else name
    if script.endswith("setup.py") and len(prog) > 2 and prog[2] in ("install", "develop", "build_ext"):
        return Command(tuple(words), "setup")
    if name in LAUNCHERS or TRAIN_WORDS.search(script) or "torch.distributed" in " ".join(prog[:4]):
        return Command(tuple(words), "launch")
    if name in ("wget", "curl") or (script != name or name.endswith(".sh")) and DATA_WORDS.search(script):
        return Command(tuple(words), "data")
    return Command(tuple(words), "other")


def looks_like_command(line: str) -> bool:
    """Whether ``line`` reads as a shell command: a ``$ `` prompt, a ``VAR=value`` assignment, or a
    first program that is a known one (``PROGRAMS``, ``python``/``pip`` of any version) or a
    script path (``./run.sh``, ``scripts/train.py``); prose and program output are not.

    >>> [looks_like_command(t) for t in ("$ make", "pip install torch", "./run.sh 8", "ANGELO:", "And so")]
    [True, True, True, False, False]
    """
    if re.match(r"^\s*\$ ", line):
        return True
    words = split_words(line)
    first = _split(words)[0][1] if _split(words) else []
    prog = _program(first)
    if first and not prog:
        return True  # only assignments
    name = prog[0] if prog else ""
    if re.fullmatch(r"(?:python|pip)[0-9.]*", name.rsplit("/", 1)[-1]):
        return True
    return name in PROGRAMS or name.startswith(("./", "../", "~/", "/")) or (
        "/" in name and name.endswith((".sh", ".py")))


def _split(words: list[str]) -> list[tuple[int, list[str]]]:
    """``(index of the first word, words)`` of each simple command of a word list."""
    out, current, start = [], [], 0
    for i, word in enumerate(words + [";"]):
        if word in SEPARATORS:
            if current:
                out.append((start, current))
            current = []
        else:
            if not current:
                start = i
            current.append(word)
    return out


def commands(line: str) -> list[Command]:
    """The simple commands of one shell line (split at ``&&``, ``||``, ``;``, ``|``, ``&``)."""
    return [classify(words) for _, words in _split(split_words(line))]


def located_commands(lines: list[tuple[int, str]]) -> list[tuple[int, Command]]:
    """The commands of physical lines ``(number, text)``, ``\\``-continued lines joined, each
    at the line where its first word is written."""
    out: list[tuple[int, Command]] = []
    group: list[tuple[int, str]] = []
    for number, text in lines + [(0, "")]:
        group.append((number, text))
        if text.rstrip().endswith("\\") and number:
            continue
        parts = [(n, t.rstrip().removesuffix("\\")) for n, t in group if t.strip()]
        words = split_words(" ".join(t for _, t in parts))
        at = [n for n, t in parts for _ in split_words(t)]
        for start, cmd_words in _split(words):
            line = at[start] if len(at) == len(words) else parts[0][0]
            out.append((line, classify(cmd_words)))
        group = []
    return out
