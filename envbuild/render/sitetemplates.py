"""The layouts of envbuild's batch scripts and reports as Jinja templates, and a site's own
templates over them. Pure.

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
with undefined names an error. ``read_site`` reads a folder into ``((file name, text), ...)``
(the command does it; rendering reads no site file): only the template names envbuild renders,
plain files inside the folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from envbuild.errors import InputError

NAMES = ("slurm.sbatch.j2", "pbs.qsub.j2", "report.html.j2", "report.md.j2")
MAX_BYTES = 256 * 1024


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
    where it gave one, else envbuild's. HTML templates escape what they print (autoescape)."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    sources = {**_ours(), **dict(site)}
    env = SandboxedEnvironment(loader=jinja2.DictLoader(sources), undefined=jinja2.StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                               autoescape=lambda template: bool(template) and template.endswith(".html.j2"))
    env.filters["lines"] = _lines
    env.filters["section"] = _section
    chosen = name if name in sources else f"envbuild/{name}"
    try:
        return env.get_template(chosen).render(context)
    except jinja2.TemplateError as exc:
        file = getattr(exc, "filename", None) or chosen
        where = f"{file}:{exc.lineno}" if getattr(exc, "lineno", None) else file
        raise InputError(f"the site template {where}: {exc.message or exc}",
                         hint='a site template extends envbuild\'s ({% extends "envbuild/' + name
                              + '" %}) and overrides its blocks: docs/launch.md, docs/reports.md') from None


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
