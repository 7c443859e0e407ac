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

Kind = Literal["pip", "setup", "apt", "conda", "venv", "data", "launch", "other"]
SEPARATORS = {"&&", "||", ";", "|", "&", ";;"}
# a shell redirection outside quotes: ``2>&1``, ``&> log``, ``> build.log``, ``>> out``, ``< in``
# (written after a blank, so an unquoted ``torch>=1.8`` stays one requirement)
REDIRECTION = re.compile(r"(?:\d*>>?|&>>?|\d*<)(?!=)(?:&\d+|\s*[^\s;&|<>'\"]+)")
# options of pip install that take a value (the value is not a requirement)
PIP_VALUED = {"-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target",
              "--prefix", "--root", "--src", "--upgrade-strategy", "--python-version", "--platform",
              "--global-option", "--install-option", "--config-settings", "-C", "--trusted-host",
              "--cache-dir", "--log", "--timeout", "--retries", "--progress-bar", "--no-binary",
              "--only-binary", "--python", "--torch-backend", "--index", "--default-index", "--index-strategy"}
UV_VALUED = {"-p"}  # uv pip install -p/--python 3.11: the interpreter, not a requirement
# a PyTorch wheel index of one build variant (https://download.pytorch.org/whl/cu124, /whl/cpu,
# /whl/rocm5.4.2, /whl/cu113/torch_stable.html): the variant is the local tag of its torch,
# torchvision and torchaudio wheels (https://pytorch.org/get-started/previous-versions/)
PYTORCH_INDEX = re.compile(r"^https?://download\.pytorch\.org/whl/(?:nightly/)?(cu\d+|cpu|rocm[\d.]+)(?:/|$)")
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

    def indexes(self) -> tuple[tuple[str, str], ...]:
        """``(URL, index_kind)`` of each index option as written: ``index-url`` for
        ``--index-url`` / ``--extra-index-url`` (and uv's ``--index``), ``find-links`` for
        ``-f`` / ``--find-links``."""
        out = []
        for opt in self.options:
            flag, sep, url = opt.partition(" ")
            if not sep:
                flag, _, url = opt.partition("=")
            if flag in ("-i", "--index-url", "--extra-index-url", "--index", "--default-index"):
                out.append((url.strip(), "index-url"))
            elif flag in ("-f", "--find-links"):
                out.append((url.strip(), "find-links"))
        return tuple(out)


def pytorch_variant(url: str) -> str | None:
    """The build variant of a PyTorch wheel index URL, else None.

    >>> pytorch_variant("https://download.pytorch.org/whl/cu124"), pytorch_variant("https://pypi.org/simple")
    ('cu124', None)
    """
    m = PYTORCH_INDEX.match(url.strip())
    return m.group(1) if m else None


@dataclass(frozen=True)
class Command:
    """One simple command of a shell line: its words and what it is."""

    words: tuple[str, ...]
    kind: Kind
    pip: PipInstall | None = None
    packages: tuple[str, ...] = field(default=())  # apt / conda package names
    python: str | None = None  # venv: the Python version it creates (``uv venv --python 3.11``)
    inside: str | None = None  # the URL of the clone it runs in (``envbuild.draft.clones``); None: the drafted tree

    @property
    def text(self) -> str:
        return shlex.join(self.words)


def unredirected(line: str) -> str:
    """``line`` without its shell redirections outside quotes (``2>&1``, ``> build.log``), each
    written after a blank: what they name is a file, not a word of the command.

    >>> unredirected("pip install . 2>&1 | tee build.log"), unredirected("pip install 'a>1' torch>=1.8")
    ('pip install .  | tee build.log', "pip install 'a>1' torch>=1.8")
    """
    out, quote, i = [], "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif (i == 0 or line[i - 1] in " \t") and (m := REDIRECTION.match(line, i)):
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def split_words(line: str) -> list[str]:
    """Shell words of ``line`` with ``&&``, ``;``, ``|`` as words of their own, its redirections
    left out (``unredirected``); a line shlex cannot read (an open quote) is split on blanks."""
    line = unredirected(line)
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


def program_words(words: list[str]) -> list[str]:
    """The words of a simple command from its program on (see ``_program``)."""
    return _program(words)


def _pip_args(words: list[str]) -> list[str] | None:
    """The arguments after ``install`` of a pip command (``pip``, ``pip3``, ``python -m pip``,
    ``uv pip``)."""
    if words and re.fullmatch(r"pip[0-9.]*", words[0].rsplit("/", 1)[-1]):
        rest = words[1:]
    elif len(words) >= 3 and re.fullmatch(r"python[0-9.]*", words[0].rsplit("/", 1)[-1]) \
            and words[1] == "-m" and words[2] == "pip":
        rest = words[3:]
    elif len(words) >= 2 and words[0].rsplit("/", 1)[-1] == "uv" and words[1] == "pip":
        rest = words[2:]
    else:
        return None
    return rest[1:] if rest and rest[0] == "install" else None


def _venv_python(prog: list[str]) -> str | None:
    """The Python version a command that makes an environment names, else None: ``uv venv
    --python 3.11``, ``uv python install 3.11``, ``python3.10 -m venv env``, ``virtualenv -p
    python3.8``, ``pyenv install 3.10.12``.

    >>> _venv_python(["uv", "venv", "nanotron", "--python", "3.11"]), _venv_python(["python3.9", "-m", "venv", "e"])
    ('3.11', '3.9')
    """
    name = prog[0].rsplit("/", 1)[-1] if prog else ""
    words: list[str] = []
    if name == "uv" and prog[1:2] == ["venv"] or name == "virtualenv":
        it = iter(prog[1:])
        words = [next(it, "") if w in ("-p", "--python") else w.split("=", 1)[1]
                 for w in it if w in ("-p", "--python") or w.startswith("--python=")]
    elif name == "uv" and prog[1:3] == ["python", "install"] or name == "pyenv" and prog[1:2] == ["install"]:
        words = [w for w in prog[3 if name == "uv" else 2:] if not w.startswith("-")][:1]
    elif re.fullmatch(r"python3\.\d+", name) and prog[1:3] == ["-m", "venv"]:
        words = [name]
    for word in words:
        if m := re.fullmatch(r"(?:python|cpython-?)?(3\.\d+)(?:\.\d+)?", word):
            return m.group(1)
    return None


def pip_install(args: list[str], uv: bool = False) -> PipInstall:
    """What the arguments of ``pip install`` name (see PipInstall); ``uv``: of ``uv pip
    install``, whose ``-p`` takes a value."""
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
        elif word in PIP_VALUED or (uv and word in UV_VALUED):
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
        return Command(tuple(words), "pip", pip=pip_install(args, uv=name == "uv"))
    if (python := _venv_python(prog)) is not None:
        return Command(tuple(words), "venv", python=python)
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
    if name in ("wget", "curl") and _installs_a_tool(prog):
        return Command(tuple(words), "other")
    if name in ("wget", "curl") or (script != name or name.endswith(".sh")) and DATA_WORDS.search(script):
        return Command(tuple(words), "data")
    return Command(tuple(words), "other")


def global_options(options: tuple[str, ...]) -> tuple[str, ...]:
    """The values of ``--global-option=X`` / ``--global-option X`` among a pip command's options,
    and of ``--config-settings`` / ``-C`` ``--build-option=X`` (pip >= 23.1's spelling).

    >>> global_options(("-v", "--global-option=--cpp_ext", "--global-option", "--cuda_ext"))
    ('--cpp_ext', '--cuda_ext')
    >>> global_options(("--config-settings --build-option=--cpp_ext", "-C --build-option=--cuda_ext"))
    ('--cpp_ext', '--cuda_ext')
    """
    out, it = [], iter(options)
    for o in it:
        if o.startswith("--global-option="):
            out.append(o.split("=", 1)[1])
        elif o == "--global-option":
            out.append(next(it, ""))
        elif o.startswith(("--global-option ", "--config-settings", "-C ")):
            value = o.split(None, 1)[1] if " " in o else o.split("=", 1)[1]
            if o.startswith("--global-option "):
                out.append(value)
            elif value.startswith("--build-option="):
                out.append(value.split("=", 1)[1])
    return tuple(v for v in out if v)


# options of docker run / podman run that take a value (the next word is not the image)
DOCKER_VALUED = {"-v", "--volume", "-e", "--env", "--env-file", "--name", "--gpus", "-p", "--publish", "-w",
                 "--workdir", "--shm-size", "--ulimit", "--network", "--net", "--mount", "-u", "--user",
                 "--entrypoint", "--runtime", "--device", "--cap-add", "--cap-drop", "--security-opt",
                 "--platform", "-h", "--hostname", "-l", "--label", "-m", "--memory", "--cpus", "--ipc",
                 "--add-host", "--restart", "--log-driver", "--pid", "--cpuset-cpus", "--tmpfs", "-a", "--attach",
                 "--volumes-from", "--pull", "--dns", "--group-add", "--memory-swap", "--expose"}


def container_image(words: list[str]) -> str | None:
    """The image a ``docker``/``podman`` ``run`` or ``pull`` command names, else None.

    >>> container_image(["docker", "run", "--gpus", "all", "-it", "--rm", "-v", "/a:/b",
    ...                  "nvcr.io/nvidia/pytorch:23.04-py3", "bash"])
    'nvcr.io/nvidia/pytorch:23.04-py3'
    """
    prog = _program(words)
    if len(prog) < 3 or prog[0].rsplit("/", 1)[-1] not in ("docker", "podman", "nvidia-docker"):
        return None
    verb, rest = prog[1], prog[2:]
    if verb == "container" and rest and rest[0] in ("run", "create"):
        verb, rest = rest[0], rest[1:]
    if verb not in ("run", "pull", "create"):
        return None
    it = iter(rest)
    for word in it:
        if word in DOCKER_VALUED:
            next(it, None)
        elif not word.startswith("-"):
            return word
    return None


def _installs_a_tool(prog: list[str]) -> bool:
    """Whether a ``wget``/``curl`` fetches a program rather than data: it writes into a system
    folder (``wget URL -O /usr/local/bin/yq``), not into the setup's tree.

    >>> _installs_a_tool(["wget", "https://x/yq_linux_amd64", "-O", "/usr/local/bin/yq"])
    True
    """
    it = iter(prog[1:])
    for word in it:
        value = next(it, "") if word in ("-O", "-o", "-P", "--output", "--output-document",
                                         "--directory-prefix") else word.partition("=")[2]
        if value.startswith(("/usr/", "/bin/", "/sbin/", "/opt/", "/etc/")):
            return True
    return False


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


def _piped(words: list[str], cmds: list[tuple[int, list[str]]]) -> list[Command]:
    """Each simple command classified; a download piped into a shell or Python (``curl -LsSf
    https://astral.sh/uv/install.sh | sh``) installs a tool: not data."""
    out = [classify(w) for _, w in cmds]
    for i, (start, w) in enumerate(cmds[:-1]):
        end = start + len(w)
        nxt = _program(cmds[i + 1][1])
        if out[i].kind == "data" and end < len(words) and words[end] == "|" and nxt and \
                re.fullmatch(r"(?:ba|z)?sh|sudo|python[0-9.]*", nxt[0].rsplit("/", 1)[-1]):
            out[i] = Command(out[i].words, "other")
    return out


def commands(line: str) -> list[Command]:
    """The simple commands of one shell line (split at ``&&``, ``||``, ``;``, ``|``, ``&``)."""
    words = split_words(line)
    return _piped(words, _split(words))


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
        cmds = _split(words)
        for (start, _w), cmd in zip(cmds, _piped(words, cmds)):
            line = at[start] if len(at) == len(words) else parts[0][0]
            out.append((line, cmd))
        group = []
    return out
