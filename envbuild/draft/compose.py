"""A survey of a repository as a recipe skeleton: data with citations, and the YAML text.

Pure: ``compose(survey, url, ref, name) -> Draft``. Every package, source and environment entry
carries ``source: {url, sha, note: "FILE:LINE"}`` and a ``why`` citing the line as written; the
commands of the README and the Dockerfile(s) are listed as comments with their lines; what
cannot be decided from the files is an ``undecided:`` entry (``envbuild check`` refuses the
recipe until each is filled and deleted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from envbuild.draft.builders import builder_of
from envbuild.draft.cite import Cite
from envbuild.draft.gitmodules import Submodule
from envbuild.draft.gitread import default_branch
from envbuild.draft.requirements import vcs_requirement
from envbuild.draft.pipcmd import PipInstall, container_image, pytorch_variant
from envbuild.draft.survey import Dependency, Survey
from envbuild.gitsrc import SHA_RE, github_slug
from envbuild.names import project_name
from envbuild.recipes.schema import GIT_URL_RE

PLACEHOLDER_PYTHON = "3.10"  # written with an undecided entry when nothing states the version
# PyTorch's own packages, published per build variant on its wheel indexes (/whl/cu124, /whl/cpu):
# the index a pip command installs them from names their variant
# (https://pytorch.org/get-started/previous-versions/, "pip install torch==... torchvision==...
# torchaudio==... --index-url https://download.pytorch.org/whl/cu118")
PYTORCH_VARIANTS = frozenset({"torch", "torchvision", "torchaudio"})


@dataclass
class Draft:
    """The recipe as data (``recipe``), its YAML text with comments, and what was left."""

    recipe: dict
    text: str
    undecided: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def link(url: str, sha: str, cite: Cite) -> dict:
    """A recipe ``source`` for a line of a tree: the GitHub blob URL with ``#L`` when the
    repository is on GitHub, else the repository's URL; ``note`` is ``FILE:LINE``."""
    slug = github_slug(url)
    where = f"https://github.com/{slug[0]}/{slug[1]}/blob/{sha}/{cite.file}#L{cite.line}" if slug else url
    return {"url": where, "sha": sha, "note": f"{cite.file}:{cite.line}"}


def plain_name(text: str) -> str:
    """A recipe/source name from a repository or project name (``GPT-NeoX`` -> ``gpt-neox``)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return name or "drafted"


def package(req_text: str, cite: Cite, src: dict, indexes: tuple[tuple[str, str], ...] = ()) -> dict | None:
    """A ``packages:`` entry of a requirement line, or None when it is not one; ``indexes``: the
    ``(URL, index_kind)`` it is installed from, whose PyPI variant (``/whl/cu124``) is the CUDA
    variant of PyTorch's own packages (``PYTORCH_VARIANTS``) where the version names none."""
    try:
        req = Requirement(req_text)
    except InvalidRequirement:
        return None
    spec = str(req.specifier)
    version = spec or "*"
    entry: dict = {"name": req.name}
    exact = [s for s in req.specifier if s.operator in ("==", "===")]
    if len(req.specifier) == 1 and exact:
        try:
            parsed = Version(exact[0].version)
            version = parsed.base_version if parsed.local else exact[0].version
            if parsed.local and re.fullmatch(r"cu\d+|cpu|rocm[\d.]+", parsed.local):
                entry["cuda"] = parsed.local
        except InvalidVersion:
            pass
    entry["version"] = version
    variant = [(url, kind, v) for url, kind in indexes if (v := pytorch_variant(url))]
    if variant and "cuda" not in entry and project_name(req.name) in PYTORCH_VARIANTS:
        url, kind, entry["cuda"] = variant[0]
        entry["index"], entry["index_kind"] = url, kind
    extra = []
    if req.extras:
        extra.append(f"extras [{','.join(sorted(req.extras))}]")
    if req.marker:
        extra.append(f"only where {req.marker}")
    entry["why"] = f"{cite}: {req_text}" + (f" ({'; '.join(extra)})" if extra else "")
    entry["source"] = src
    return entry


class Composer:
    """Builds the recipe dict from a survey (one instance per draft)."""

    def __init__(self, found: Survey, url: str, ref: str, name: str):
        self.found, self.url, self.ref, self.name = found, url, ref, name
        self.sha = found.tree.commit
        self.undecided: list[dict] = []
        self.comments: list[str] = []

    def leave(self, field_path: str, why: str) -> None:
        self.undecided.append({"field": field_path, "why": why})

    def src(self, cite: Cite) -> dict:
        return link(self.url, self.sha, cite)

    def python(self) -> tuple[str, dict | None]:
        for path, env in self.found.conda.items():
            if env.python:
                return env.python.text, self.src(Cite(path, env.python.line))
        for cite, cmd in self.found.commands:
            if cmd.python:  # uv venv --python 3.11, python3.10 -m venv, pyenv install 3.10.12
                return cmd.python, self.src(cite)
            for word in cmd.packages:
                m = re.fullmatch(r"python(?:=|==)?(3\.\d+)(?:[.=*].*)?|python(3\.\d+)(?:-.*)?", word)
                if m:
                    return m.group(1) or m.group(2), self.src(cite)
        for path, df in self.found.dockerfiles.items():
            for f in df.froms:
                if m := re.match(r"^(?:docker\.io/)?(?:library/)?python:(3\.\d+)", f.image):
                    return m.group(1), self.src(Cite(path, f.line))
        bounds = [f"{name}:{d.python.line} requires Python {d.python.text}"
                  for name, d in self.found.metadata.items() if d.python]
        self.leave("python", "no Python version is stated (environment.yml, apt, conda or venv lines, a python: image)"
                   + (f"; {'; '.join(bounds)}" if bounds else "") + f": {PLACEHOLDER_PYTHON} is a placeholder")
        return PLACEHOLDER_PYTHON, None

    def images(self) -> list[str]:
        """Each image the instructions build on or run, as ``FILE:LINE builds FROM IMAGE`` (the
        last stage of each Dockerfile) or ``FILE:LINE runs IMAGE`` (``docker run``/``pull``)."""
        out: list[str] = []
        for path, df in self.found.dockerfiles.items():
            if df.froms:
                f = df.froms[-1]
                what = f.image if not f.image.startswith("$") else (
                    f"{f.image}, a build argument with no default (the image is chosen at build time)")
                out.append(f"{path}:{f.line} builds FROM {what}")
        seen: set[str] = set()
        for cite, cmd in self.found.commands:
            image = container_image(list(cmd.words))
            if image and image not in seen:
                seen.add(image)
                placeholder = " (its tag is a placeholder)" if re.search(r":.*\bx{2}\b", image, re.I) else ""
                out.append(f"{cite} runs {image}{placeholder}")
        return out

    def environment(self) -> dict:
        images = self.images()
        if images:
            self.leave("environment", "; ".join(images) + ": a venv on the node, or that image (kind: container, "
                                                          "base_image)?")
            return {"kind": "venv"}
        if self.found.conda:
            path = next(iter(self.found.conda))
            return {"kind": "conda", "source": self.src(Cite(path, 1))}
        return {"kind": "venv"}

    def _rows(self) -> list[tuple[Cite, str, tuple[tuple[str, str], ...], bool]]:
        """Every requirement the instructions install, with the index options it is installed
        from (a requirements file's own ``--index-url`` / ``-f`` lines, a pip command's options)
        and whether its command builds it without isolation (``--no-build-isolation``)."""
        rows: list[tuple[Cite, str, tuple[tuple[str, str], ...], bool]] = []
        file_indexes: dict[str, list[tuple[str, str]]] = {}
        for c, r in self.found.requirements.rows:
            if r.kind == "option":
                file_indexes.setdefault(c.file, []).extend(PipInstall(options=(r.text,)).indexes())
        rows += [(c, r.target, tuple(file_indexes.get(c.file, ())), True)
                 for c, r in self.found.requirements.rows if r.kind == "requirement"]
        for cite, cmd in self.found.commands:
            if cmd.pip:
                isolated = "--no-build-isolation" not in cmd.pip.options
                rows += [(cite, r, cmd.pip.indexes(), isolated) for r in cmd.pip.requirements]
        for path, env in self.found.conda.items():
            rows += [(Cite(path, r.line), r.text, (), True) for r in env.pip if not r.text.startswith("-")]
        return rows

    def packages(self) -> list[dict]:
        out: dict[str, dict] = {}
        extra_rows = self.extras()
        for cite, text, indexes, isolated in self._rows():
            entry = package(text, cite, self.src(cite), indexes)
            if entry is not None and not isolated:
                entry["build_isolation"] = False  # pip install --no-build-isolation: its build imports torch
            if entry is None:
                self.comments.append(f"{cite}: {text}: not a requirement, left out")
                continue
            if str(entry.get("cuda", "")).startswith("rocm"):
                self.comments.append(f"{cite}: {text}: a ROCm build (AMD GPUs), not a CUDA one: left out")
                continue
            key = project_name(entry["name"])
            if key in out:
                merge(out[key], entry, f"{cite}: {text}")
                continue
            out[key] = entry
        for entry in extra_rows:
            key = project_name(entry["name"])
            if key in out:
                merge(out[key], entry, entry["why"])
            else:
                out[key] = entry
        listed = list(out.values())
        for i, entry in enumerate(listed):
            if project_name(entry["name"]) == "torch" and "cuda" not in entry:
                self.leave(f"packages[{i}].cuda", f"torch ({entry['why']}) names no CUDA variant: cu118, cpu, "
                                                  "auto (from the node's CUDA)?")
        return listed

    def _main_install(self) -> tuple[str, str, tuple[str, ...]]:
        """``(install, why, extras)``: how the first instruction that installs the drafted tree
        installs it, and the extras it names (``pip install -e ".[gpu]"``)."""
        for cite, cmd in self.found.commands:
            if cmd.inside is not None:  # run in another clone: its `pip install .` is that clone's
                continue
            own = [editable for c, _url, editable in self.found.self_installs if c == cite]
            if own:  # pip install git+URL of the drafted repository itself
                return ("editable" if own[0] else "wheel"), f"{cite}: {cmd.text}", ()
            for kind, targets in (("editable", cmd.pip.editables if cmd.pip else ()),
                                  ("wheel", cmd.pip.paths if cmd.pip else ())):
                here = [p for p in targets if is_here(p)]
                if here:
                    extras = re.findall(r"[A-Za-z0-9._-]+", here[0][here[0].find("["):]) if "[" in here[0] else []
                    return kind, f"{cite}: {cmd.text}", tuple(extras)
            if cmd.kind == "setup" and cmd.words[1:2] == ("setup.py",):
                return "wheel", f"{cite}: {cmd.text}", ()
        return "none", "no instruction installs the tree itself", ()

    def extras(self) -> list[dict]:
        """The requirements of the extras the tree's install names (``.[gpu]``), read from its
        setup.py ``extras_require`` or pyproject.toml ``[project.optional-dependencies]``: the
        lock reads a source's base dependencies only, so they are packages here."""
        _install, why, names = self._main_install()
        out: list[dict] = []
        for extra in names:
            found = [(meta, d.extra(extra)) for meta, d in self.found.metadata.items() if d.extra(extra) is not None]
            if not found:
                self.leave("packages", f"{why.split(': ', 1)[0]} installs the tree with extra [{extra}], which no "
                                       "setup.py extras_require or pyproject.toml optional-dependencies literal "
                                       "defines: name its requirements as packages")
                continue
            meta, rows = found[0]
            for r in rows or ():
                cite = Cite(meta, r.line)
                if vcs_requirement(r.text) or "://" in r.text:
                    self.leave("sources", f"{cite}: {r.text} (extra [{extra}]) is a requirement by URL: a source "
                                          "of its own (sources:), or left out?")
                    continue
                entry = package(r.text, cite, self.src(cite))
                if entry is not None:
                    entry["why"] += f" (extra [{extra}] of the tree, installed by {why})"
                    out.append(entry)
        return out

    def main_source(self) -> dict:
        install, why, _extras = self._main_install()
        own = [(c, cmd) for c, cmd in self.found.commands if cmd.inside is None]  # not in another clone
        entry = {"name": self.name, "url": self.url, "ref": self.ref, "sha": self.sha, "install": install,
                 "why": f"the drafted repository at {self.ref}; install {install}: {why}",
                 "source": {"url": self.url, "ref": self.ref, "sha": self.sha}}
        builds = [(c, cmd) for c, cmd in own if cmd.kind == "setup" and cmd.words[1:2] != ("setup.py",)]
        if builds:
            self.leave("sources[0].build", "; ".join(f"{c} runs `{cmd.text}`" for c, cmd in builds)
                       + ": a build step of the tree (build:), or not needed?")
        if install == "none" and any(m in self.found.files for m in ("setup.py", "pyproject.toml")):
            self.leave("sources[0].install", "the tree has package metadata but no instruction installs it: "
                                             "none (scripts run from the tree), editable or wheel?")
        return entry

    def dependency(self, dep: Dependency, index: int, names: set[str]) -> dict:
        base = plain_name(dep.vcs.name or dep.vcs.url.rsplit("/", 1)[-1])
        name = base if base not in names else f"{base}-{index}"
        names.add(name)
        entry: dict = {"name": name, "url": dep.vcs.url, "ref": dep.vcs.ref or "HEAD"}
        where = f"sources[{index}]"
        if dep.tree is not None:
            entry["sha"] = dep.tree.commit
            if not dep.vcs.ref:
                entry["ref"] = default_branch(dep.tree)
                self.leave(f"{where}.sha", f"{dep.cite} names no ref: the mirror's {entry['ref']} head "
                                           f"{dep.tree.commit[:12]} was taken")
        elif dep.vcs.ref and SHA_RE.match(dep.vcs.ref):
            entry["sha"] = dep.vcs.ref
        else:
            entry["unverified"] = f"{dep.cite} names ref {dep.vcs.ref or '(none)'}; not read: {dep.unread}"
            self.leave(f"{where}.sha", f"{dep.cite}: {dep.vcs.url}@{dep.vcs.ref or ''} could not be resolved "
                                       f"to a commit ({dep.unread}); pin it")
        entry["install"] = "editable" if dep.editable else "wheel"
        if (builder := builder_of(dep.vcs.url)) and not dep.editable:
            # a repository envbuild builds itself (data/builders.yaml: NVIDIA's Apex, whose
            # extensions its README builds by --global-option values)
            entry["install"] = builder.install
            if dep.global_options:
                entry["build_options"] = list(dep.global_options)
        if dep.tree is None:
            self.leave(f"{where}.requirements", f"{dep.cite}: {dep.vcs.url} was not read ({dep.unread}): name its "
                                                "requirements files (requirements: [PATH]), or dependencies: metadata")
        reqs = dep.requirements
        if reqs and reqs.files:
            entry["requirements"] = reqs.files
        cite = dep.cite
        origin = (f"; its dependencies: {dep.metadata}" if dep.metadata else
                  f"; its dependencies: {', '.join(reqs.files)} at {dep.tree.commit[:12]}" if reqs and dep.tree else
                  f"; its dependencies not read: {dep.unread}" if dep.unread else "")
        entry["why"] = (f"{cite}: pip install {'-e ' if dep.editable else ''}" + (
            f"{'the clone of ' if dep.cloned else 'git+'}{dep.vcs.url}{('@' + dep.vcs.ref) if dep.vcs.ref else ''}"
            + (" (git clone, then an install in its folder)" if dep.cloned else "")) + origin)
        entry["source"] = self.src(cite) if cite.repo is None else {"url": dep.vcs.url, "note": str(cite)}
        if reqs:
            self.comments.append(f"{name}: read at {dep.tree.commit[:12] if dep.tree else '?'} "
                                 f"(the lock reads them through requirements:):")
            self.comments += [f"  {c}: {r.text}" for c, r in reqs.rows]
            self.comments += [f"  note: {n}" for n in reqs.notes]
        return entry

    def submodule(self, sub: Submodule, sha: str | None, index: int, names: set[str]) -> dict:
        name = plain_name(sub.name.rsplit("/", 1)[-1])
        name = name if name not in names else f"{name}-{index}"
        names.add(name)
        cite = Cite(".gitmodules", sub.line)
        entry: dict = {"name": name, "url": sub.url, "ref": sub.branch or (sha or "HEAD")}
        if sha:
            entry["sha"] = sha
        else:
            entry["unverified"] = f"{cite}: no commit recorded for {sub.path}"
            self.leave(f"sources[{index}].sha", f"{cite}: submodule {sub.path} has no pinned commit")
        entry["install"] = "none"
        entry["why"] = f"{cite}: submodule {sub.name} at {sub.path}, pinned by the tree"
        entry["source"] = self.src(cite)
        self.leave(f"sources[{index}].install", f"{cite}: how is submodule {sub.path} used (none, editable, wheel)?")
        return entry

    def system_packages(self) -> list[str]:
        out: dict[str, Cite] = {}
        for cite, cmd in self.found.commands:
            if cmd.kind == "apt":
                for pkg in cmd.packages:
                    out.setdefault(pkg, cite)
        self.comments += [f"system package {p}: {c}" for p, c in out.items()]
        return list(out)

    def commands(self) -> None:
        launches = [(c, cmd) for c, cmd in self.found.commands if cmd.kind == "launch"]
        data = [(c, cmd) for c, cmd in self.found.commands if cmd.kind == "data"]
        self.leave("benchmark", ("; ".join(f"{c} launches `{cmd.text}`" for c, cmd in launches[:3])
                                 if launches else "no training launch found in the README's shell blocks")
                   + ": the benchmark's command, parser, metric and threshold are not in the repository's files")
        if data:
            self.leave("data", "; ".join(f"{c} prepares data: `{cmd.text}`" for c, cmd in data[:3])
                       + ": which files, from where, with which sha256?")
        self.leave("targets", "the nodes this recipe is for are not in the repository: name envbuild targets")

    def recipe(self) -> dict:
        python, py_src = self.python()
        out: dict = {"schema": 1, "name": self.name, "title": f"{self.name} at {self.ref} (drafted)",
                     "description": f"Drafted by envbuild draft from {self.url} at {self.ref} ({self.sha[:12]}); "
                                    "every pin cites FILE:LINE at that commit.",
                     "published": {"url": self.url, "ref": self.ref, "sha": self.sha}}
        out["python"] = python
        if py_src:
            self.comments.insert(0, f"python {python}: {py_src['note']}")
        out["resolve_as_of"] = self.found.tree.date()
        out["targets"] = []
        out["environment"] = self.environment()
        system = self.system_packages()
        if system:
            out["system_packages"] = system
        out["packages"] = self.packages()
        names = {self.name}
        sources = [self.main_source()]
        for dep in self.found.dependencies:
            sources.append(self.dependency(dep, len(sources), names))
        for sub, sha in self.found.submodules:
            if not GIT_URL_RE.match(sub.url):
                self.comments.append(f".gitmodules:{sub.line}: submodule {sub.path} URL {sub.url!r} is not "
                                     "absolute: left out")
                continue
            sources.append(self.submodule(sub, sha, len(sources), names))
        out["sources"] = sources
        self.commands()
        out["undecided"] = self.undecided
        return out


def compose(found: Survey, url: str, ref: str, name: str) -> Draft:
    """The recipe skeleton of a survey (see module)."""
    c = Composer(found, url, ref, name)
    recipe = c.recipe()
    notes = list(found.notes) + list(found.requirements.notes)
    for meta, declared in found.metadata.items():
        notes += list(declared.notes)
        notes += [f"{meta}:{r.line}: {r.text} (package metadata: the lock reads it for an editable or wheel install)"
                  for r in declared.requires]
    notes += [f"{path}: not installed by any instruction, not read" for path in found.other_requirement_files]
    for path, env in found.conda.items():
        notes += [f"{path}:{r.line}: conda {r.text}" for r in env.conda] + list(env.notes)
    for path, df in found.dockerfiles.items():
        notes += [f"{path}:{a.line}: ARG {a.text}" for a in df.args]
        notes += [f"{path}:{f.line}: FROM {f.written}" + (f" ({f.image})" if f.image != f.written else "")
                  for f in df.froms]
    commands = [f"{cite}: [{cmd.kind}] {cmd.text}" for cite, cmd in found.commands]
    text = render(recipe, found, url, ref, c.comments, notes, commands)
    return Draft(recipe, text, c.undecided, notes)


def _comment_block(title: str, lines: list[str]) -> str:
    if not lines:
        return ""
    body = "\n".join("#   " + line.replace("\n", " ") for line in lines)
    return f"#\n# {title}\n{body}\n"


def render(recipe: dict, found: Survey, url: str, ref: str, comments: list[str], notes: list[str],
           commands: list[str]) -> str:
    """The recipe's YAML with a header and the read lines as comments."""
    head = (f"# Drafted by `envbuild draft` from {url} at {ref} ({found.tree.commit}).\n"
            "# Every pin, source and command cites FILE:LINE at that commit. Fill each `undecided:` entry\n"
            "# and delete it: `envbuild check` refuses this recipe while any is left.\n")
    body = yaml.safe_dump(recipe, sort_keys=False, width=100, allow_unicode=True, default_flow_style=False)
    tail = (_comment_block("commands read (README shell blocks, Dockerfile RUN lines):", commands)
            + _comment_block("also read:", comments) + _comment_block("notes:", notes))
    return head + body + tail


def merge(held: dict, again: dict, why: str) -> None:
    """A package named twice: the first entry, with what the second says that it does not (a
    version where it had none, pip keeping the pinned release either way; the CUDA variant of
    the index a later line installs it from)."""
    held["why"] += f"; also {why}"
    if held["version"] == "*" and again["version"] != "*":
        held["version"], held["source"] = again["version"], again["source"]
    if "cuda" in again and "cuda" not in held:
        held.update({k: again[k] for k in ("cuda", "index", "index_kind") if k in again})


def is_here(path: str) -> bool:
    """Whether a pip install target is the folder the command runs in (``.``, ``./``, ``.[gpu]``).

    >>> is_here(".[gpu]"), is_here("./"), is_here("./apex")
    (True, True, False)
    """
    return re.sub(r"\[[^\]]*\]$", "", path) in (".", "./")
