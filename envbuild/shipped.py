"""Where envbuild's own shipped files lie: the one locator every module asks (issue 20).

Everything provisioning reads at run time ships in the wheel (pyproject's package-data): the
recipes and targets, the shipped locks, the node side's standard-library tools, the smoke
scripts and the Ansible playbook with its collection. Each folder is named once here; a module
that needs one imports its name instead of climbing from its own ``__file__``.

Two of them are not the package's own: ``playbooks/`` (provision.yml, ansible.cfg and the
collection envbuild.node) and ``lockfiles/`` lie at the top of the source tree, beside
``envbuild/``, and the build backend maps them into the wheel as ``envbuild/playbooks`` and
``envbuild/lockfiles`` (setup.py). One rule finds both: inside the package when the package
holds them (an installed wheel), else at the top of the checkout that holds the package (a source
checkout, or an editable install of one). ``INSTALLED`` says which; nothing envbuild writes goes
into an installed package (``envbuild.lock.location``).

An *asset* is one of these files that an action copies to a node or into an image, named
``<group>/<file>`` (``smoke/gpt.py``, ``node/verify_image.py``): plans carry the name, never a
controller path (``envbuild.actions.assets`` finds the file, and the controller's uv binary as
the ``uv`` group).

    >>> asset_of(NODE / "verify_image.py")
    'node/verify_image.py'
    >>> (PLAYBOOKS / "provision.yml").is_file()
    True
    >>> LOCKFILES.parent == (PACKAGE if INSTALLED else CHECKOUT)
    True
"""

from __future__ import annotations

from pathlib import Path

from envbuild.errors import InputError

PACKAGE = Path(__file__).resolve().parent
NODE = PACKAGE / "node"  # the node side: standard library only, copied to nodes and images
SMOKE = PACKAGE / "smoke"  # the smoke scripts (run with the environment's python)
RECIPES = PACKAGE / "recipes" / "data"  # <recipe>.yaml
SCRIPT_IMPORTS = PACKAGE / "recipes" / "imports"  # what each recipe's entry scripts import
TARGETS = PACKAGE / "targets" / "data"  # <target>.yaml
COMPAT = PACKAGE / "compat"  # the facts the preflight rows read (*.yaml)
REPORT_SCHEMA_FILE = PACKAGE / "report" / "report.schema.json"  # the report's JSON schema
REFERENCES_FILE = SMOKE / "references.json"  # the same-GPU references the judge reads (envbuild.smoke.references)
CHECKOUT = PACKAGE.parent  # the source checkout (or site-packages, in an installed wheel)


def top_of(package: Path) -> Path:
    """Where the source tree's top-level folders (``playbooks/``, ``lockfiles/``) lie for the
    package folder ``package``: in it when it holds them (an installed wheel, where the build
    backend put them), else beside it (a source checkout)."""
    return package if (package / "playbooks").is_dir() else package.parent


TOP = top_of(PACKAGE)
INSTALLED = TOP == PACKAGE  # an installed wheel, not a source checkout
PLAYBOOKS = TOP / "playbooks"  # provision.yml, ansible.cfg and the collection envbuild.node
LOCKFILES = TOP / "lockfiles"  # <recipe>/<target>.lock of the shipped recipes

#: the asset groups of shipped files (the ``uv`` group is the controller's binary, found at run time)
ASSET_GROUPS = {"smoke": SMOKE, "node": NODE}
# what an image's build context is made from besides its plan: the code that renders it and the
# files it copies (envbuild.plan.image.code_digest)
IMAGE_CODE = (PACKAGE / "render", PACKAGE / "actions", NODE, SMOKE)


def asset_of(path: str | Path) -> str:
    """The asset name (``<group>/<file>``) of one of envbuild's shipped files (InputError if none)."""
    path = Path(path).resolve()
    for group, folder in ASSET_GROUPS.items():
        if path.parent == folder.resolve():
            return f"{group}/{path.name}"
    raise InputError(f"{path} is not one of envbuild's shipped files")


def checkout_commit() -> str | None:
    """The commit of the git checkout envbuild runs from (read from its .git files, no git
    process), None for an installed wheel or anything unreadable: what a provenance statement
    names as the builder's source."""
    import re

    git = PACKAGE.parent / ".git"
    try:
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            git = (git.parent / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if re.fullmatch(r"[0-9a-f]{40}", head):
            return head
        ref = head.removeprefix("ref:").strip()
        if (git / ref).is_file():
            sha = (git / ref).read_text().strip()
        else:
            sha = next((line.split()[0] for line in (git / "packed-refs").read_text().splitlines()
                        if line.endswith(" " + ref)), "")
        return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else None
    except (OSError, IndexError, ValueError):
        return None
