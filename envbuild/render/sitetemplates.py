"""The layouts of envbuild's batch scripts and reports as Jinja templates, and a site's own
templates over them. Pure: context in, text out (a site's templates in a bounded child process).

``envbuild/render/jinja/`` holds them: ``slurm.sbatch.j2`` and ``pbs.qsub.j2`` (envbuild.launch
renders them) and ``report.html.j2`` and ``report.md.j2`` (envbuild.report). Each lays its
output out in named blocks (the scripts: ``header``, ``directives``, ``account``, ``modules``,
``environment``, ``task``, ``run``, and Slurm's ``mounts``; the reports: ``style``,
``title``, ``verdict``, one block per section, ``footer``). Every value they print was made
for its format by envbuild before it reaches the template: shell words (the renderers quote
by construction), escaped HTML (and the HTML template escapes anything else it prints:
autoescape). Nothing read from a recipe, lock, log or node is ever a template: it is data in
the context, printed as it is.

A site overrides one block, without patching envbuild, with a template of the same file name
in its own folder (``envbuild launch --templates DIR``, ``envbuild report --templates DIR``)
that extends envbuild's::

    {% extends "envbuild/slurm.sbatch.j2" %}
    {% block modules %}
    module load cudatoolkit/12.4
    {% endblock %}

The site's templates run in Jinja's sandbox (no attribute of a Python object beyond the data),
with undefined names an error, and in a child process of their own bounded in time
(``SITE_TIME_S``), memory (``SITE_MEMORY_BYTES``) and output (``SITE_OUTPUT_BYTES``): a site
template that loops or allocates without end is an InputError naming it, not a hung or
swapping controller (rendering stays a function: context in, text out). The sandbox needs
jinja2 >= 3.1.6 (CVE-2025-27516: ``|attr`` escaped it through ``str.format``): an older one
renders no site template (``SANDBOX_FLOOR``). ``read_site`` reads a folder into ``((file name, text), ...)``
(the command does it; rendering reads no site file): only the template names envbuild renders,
plain files inside the folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

from envbuild.errors import EnvironmentProblem, InputError

NAMES = ("slurm.sbatch.j2", "pbs.qsub.j2", "report.html.j2", "report.md.j2")
MAX_BYTES = 256 * 1024
SITE_TIME_S = 20  # envbuild's own templates render in milliseconds
SITE_MEMORY_BYTES = 1 << 30  # the child's address space (RLIMIT_AS)
SITE_OUTPUT_BYTES = 32 << 20  # a report with every pin of a large fleet is a few MB
SANDBOX_FLOOR = (3, 1, 6)  # the first jinja2 without CVE-2025-27516 (pyproject's floor)
# the child's program: this envbuild (installed or a checkout: -I leaves PYTHONPATH out) renders
CHILD = "import sys; sys.path.insert(0, {root!r}); from envbuild.render.sitetemplates import _child; _child()"


def _ours() -> dict[str, str]:
    root = resources.files("envbuild.render") / "jinja"
    return {f"envbuild/{n}": (root / n).read_text(encoding="utf-8") for n in NAMES}


def _lines(text: str) -> str:
    """A block's text as whole lines: nothing when it is blank, else ending with a line break
    (so a site's one-line ``{% block modules %}module load x{% endblock %}`` stays a line)."""
    if not text.strip():
        return ""
    return text if text.endswith("\n") else text + "\n"


def _section(text: str) -> str:
    """A report section's text ending with exactly one blank line (nothing when blank)."""
    return text.rstrip("\n") + "\n\n" if text.strip() else ""


def render(name: str, context: dict, site: tuple[tuple[str, str], ...] = ()) -> str:
    """``name`` (one of ``NAMES``) rendered with ``context``: the site's template of that name
    where it gave one, else envbuild's. HTML templates escape what they print (autoescape).
    With site templates the rendering runs apart, bounded (``_render_apart``)."""
    if site:
        return _render_apart(name, context, site)
    return _render_here(name, context, site)


def sandbox_safe(version: str) -> bool:
    """Whether a jinja2 ``version`` is at or above ``SANDBOX_FLOOR``.

    >>> sandbox_safe("3.1.5"), sandbox_safe("3.1.6"), sandbox_safe("3.2.0.dev1"), sandbox_safe("4.0")
    (False, True, True, True)
    """
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(c for c in piece[:4] if c.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts))) >= SANDBOX_FLOOR


def _render_apart(name: str, context: dict, site: tuple[tuple[str, str], ...]) -> str:
    """``_render_here`` in a child Python (``python -I``, ``_child``) limited
    to ``SITE_MEMORY_BYTES`` of memory and ``SITE_OUTPUT_BYTES`` of output, stopped after
    ``SITE_TIME_S``; the context goes as JSON (``Markup`` values marked as such)."""
    from importlib.metadata import version

    from markupsafe import Markup

    if not sandbox_safe(version("jinja2")):
        raise EnvironmentProblem(f"jinja2 {version('jinja2')} is installed: its sandbox has a known escape "
                                 "(CVE-2025-27516), so no site template is rendered with it",
                                 hint="pip install 'jinja2>=3.1.6' (envbuild's declared floor)")
    request = json.dumps({"name": name, "site": [list(pair) for pair in site],
                          "markup": sorted(k for k, v in context.items() if isinstance(v, Markup)),
                          "context": {k: str(v) if isinstance(v, Markup) else v for k, v in context.items()}},
                         ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", CHILD.format(root=str(Path(__file__).resolve().parents[2]))],
                              input=request, capture_output=True, timeout=SITE_TIME_S)
    except subprocess.TimeoutExpired:
        raise InputError(f"the site template {name} ran longer than {SITE_TIME_S} s: stopped",
                         hint="a site template overrides a few blocks of envbuild's; loop over the data, "
                              "not over large ranges") from None
    try:
        answer = json.loads(proc.stdout.decode("utf-8", "surrogatepass"))
    except ValueError:
        said = proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"]
        raise InputError(f"the site template {name} stopped its renderer (exit {proc.returncode}): {said[-1][:300]}",
                         hint=f"a site template may use {SITE_MEMORY_BYTES >> 20} MiB of memory and "
                              f"{SITE_TIME_S} s") from None
    if "text" not in answer:
        raise InputError(answer["message"], hint=answer.get("hint"))
    return answer["text"]


def _child() -> None:
    """The child of ``_render_apart``: limits set first, then the request from stdin rendered,
    the answer (``{"text"}`` or ``{"message", "hint"}``) on stdout."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (SITE_MEMORY_BYTES, SITE_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (SITE_TIME_S + 1, SITE_TIME_S + 1))
    from markupsafe import Markup

    req = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    context = {k: Markup(v) if k in req["markup"] else v for k, v in req["context"].items()}
    try:
        answer = {"text": _render_here(req["name"], context, tuple(tuple(p) for p in req["site"]))}
    except InputError as exc:
        answer = {"message": exc.message, "hint": exc.hint}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _render_here(name: str, context: dict, site: tuple[tuple[str, str], ...]) -> str:
    """The rendering itself, in this process: the output cut at ``SITE_OUTPUT_BYTES`` (as
    characters: at most 4 bytes each) and any failure an InputError naming the template."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    sources = {**_ours(), **dict(site)}
    env = SandboxedEnvironment(loader=jinja2.DictLoader(sources), undefined=jinja2.StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                               autoescape=lambda template: bool(template) and template.endswith(".html.j2"))
    env.filters["lines"] = _lines
    env.filters["section"] = _section
    chosen = name if name in sources else f"envbuild/{name}"
    hint = ('a site template extends envbuild\'s ({% extends "envbuild/' + name
            + '" %}) and overrides its blocks: docs/launch.md, docs/reports.md')
    out: list[str] = []
    size = 0
    try:
        for chunk in env.get_template(chosen).generate(context):
            size += len(chunk)
            if size > SITE_OUTPUT_BYTES:
                raise InputError(f"the site template {chosen}: its output passed {SITE_OUTPUT_BYTES >> 20} MiB: cut",
                                 hint=hint)
            out.append(chunk)
    except jinja2.TemplateError as exc:
        file = getattr(exc, "filename", None) or chosen
        where = f"{file}:{exc.lineno}" if getattr(exc, "lineno", None) else file
        raise InputError(f"the site template {where}: {exc.message or exc}", hint=hint) from None
    except MemoryError:
        raise InputError(f"the site template {chosen} needed more than {SITE_MEMORY_BYTES >> 20} MiB of memory",
                         hint=hint) from None
    except (ArithmeticError, RecursionError, ValueError, TypeError) as exc:  # e.g. the sandbox's range cap
        if not site:
            raise  # envbuild's own templates: a bug, shown as one
        raise InputError(f"the site template {chosen}: {type(exc).__name__}: {str(exc)[:300]}", hint=hint) from None
    return "".join(out)


def read_site(folder: Path) -> tuple[tuple[str, str], ...]:
    """The site's templates in ``folder``: each of ``NAMES`` that is a plain file there (a link
    or a file over 256 KiB refused), as ``(name, text)``. A folder with none of them is refused."""
    if not folder.is_dir():
        raise InputError(f"--templates {folder}: not a folder", hint="give the folder that holds your "
                         + ", ".join(NAMES))
    out = []
    for name in NAMES:
        path = folder / name
        if path.is_symlink():
            raise InputError(f"{path}: a link; a site template is a plain file in the folder it names",
                             hint="copy the template into the folder")
        if not path.exists():
            continue
        if not path.is_file() or path.stat().st_size > MAX_BYTES:
            raise InputError(f"{path}: not a plain file of at most {MAX_BYTES // 1024} KiB",
                             hint="a site template overrides a few blocks of envbuild's")
        try:
            out.append((name, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                             hint="save the template as UTF-8") from None
    if not out:
        raise InputError(f"--templates {folder}: holds none of " + ", ".join(NAMES),
                         hint="name your template as envbuild's: " + ", ".join(NAMES))
    return tuple(out)
