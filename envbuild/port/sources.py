"""The variant's Apex (by envbuild's Apex rows: ``envbuild.port.apex``) and the PyPI packages
read at their release tag (``packages.yaml``): an upgrade where the release cannot run on the
stack, a git source where the known fixes must patch it."""

from __future__ import annotations

import copy
import re

from envbuild import gitsrc
from envbuild.draft.gitread import Tree
from envbuild.errors import InputError
from envbuild.port import scan as sc
from envbuild.compat.commits import apex_commits
from envbuild.port.apex import choose_apex
from envbuild.port.state import TEST, Port, open_tree, published_env
from envbuild.port.tables import PackageRepo, package_repo, package_table
from envbuild.recipes.schema import Recipe
from envbuild.versions import pinned


def port_package_sources(p: Port) -> None:
    """PyPI packages whose repository the table names (deepspeed...): read at the release's
    tag; an upgrade row moves the pin, and a package the fixes patch becomes a git source."""
    _, upgrades = package_table()
    for pkg in list(p.data.get("packages", [])):
        repo = package_repo(pkg["name"])
        version = pinned(str(pkg["version"]))
        if repo is None or pkg.get("preinstalled") or not version:
            continue
        tree = open_tree(p, pkg["name"], repo.url, None if p.mirror is None else _tag_sha(p, repo.url, repo.tag_of(version)))
        if tree is None:
            p.notes.append(f"{pkg['name']} {version}: its release {repo.tag_of(version)} was not read "
                           f"({p.found.unread.get(pkg['name'])}): fixes and upgrades not checked there")
            continue
        for up in upgrades:
            if up.package == pkg["name"].lower() and up.holds(p.versions(), p.stack.node_own) and \
                    any(re.search(up.pattern, tree.read(f) or "") for f in sc.grep(tree, up.grep, up.files)):
                p.deviate(up.id, f"{pkg['name']} {version}", up.breaks,
                          f"{pkg['name']} {up.to}, the closest release without it", up.source,
                          ["envbuild.port.sources:port_package_sources", "envbuild.compat.rules_deepspeed:_elastic_agent"],
                          [TEST + "test_port_reads_a_package_at_its_release_tag"])
                pkg["version"] = up.to
                pkg["why"] = f"{up.breaks}; {up.to} is the closest release that imports (envbuild port, {up.id})"
                version = up.to
                tree = open_tree(p, pkg["name"], repo.url, _tag_sha(p, repo.url, repo.tag_of(version)))
                if tree is None:
                    break
        if tree is None:
            continue
        if sc.scan(tree, pkg["name"], p.holding_fixes(), sc.ScanContext(cc=p.stack.arch)):
            p.found.trees[_to_source(p, pkg, repo, repo.tag_of(version), tree)] = tree  # port_fixes patches it


def _tag_sha(p: Port, url: str, tag: str) -> str | None:
    repo = gitsrc.mirror_path(url, p.mirror) if p.mirror else None
    if repo is None:
        return None
    try:
        return gitsrc.resolve_ref(repo, tag)
    except InputError:
        return None


def _to_source(p: Port, pkg: dict, repo: PackageRepo, tag: str, tree: Tree) -> str:
    p.data["packages"] = [q for q in p.data["packages"] if q is not pkg]
    name, url = re.sub(r"[^a-z0-9-]+", "-", pkg["name"].lower()), repo.url
    src = {"name": name, "url": url, "ref": tag, "sha": tree.commit, "install": "wheel",
           "why": f"{pkg['name']} {pkg['version']} (the published pin) built from its release tag {tag}, so that the "
                  "known fixes below can patch it (envbuild port)"
                  + (f"; its dependencies are those of {', '.join(repo.requirements)}, which its setup.py reads"
                     if repo.requirements else ""),
           "source": {"url": f"{url}/tree/{tag}", "sha": tree.commit}}
    if repo.requirements:
        src["requirements"] = list(repo.requirements)
    p.data.setdefault("sources", []).append(src)
    p.deviate(f"{name}-from-source", f"pip install {pkg['name']}=={pkg['version']}",
              f"the release needs the patches below on {p.stack.label()}, and a PyPI wheel cannot be patched",
              f"{pkg['name']} built as a wheel from {tag} ({tree.commit[:12]}) with the patches", f"{url}/tree/{tag}",
              ["envbuild.port.sources:port_package_sources", "envbuild.actions.steps:_install_source"],
              [TEST + "test_port_reads_a_package_at_its_release_tag"])
    return name


def port_apex(p: Port) -> None:
    """The Apex commit and options by envbuild's Apex rows; an Apex the published image or
    module carried is built from source here."""
    src_i = next((i for i, s in enumerate(p.data.get("sources", [])) if s.get("install") == "apex"), None)
    pkg = next((q for q in p.recipe.packages if q.name.lower() == "apex"), None)
    if src_i is None and pkg is None:
        return
    base = p.data["sources"][src_i] if src_i is not None else {
        "name": "apex", "url": "https://github.com/NVIDIA/apex", "ref": "master", "install": "apex",
        "build_options": ["--cpp_ext", "--cuda_ext"]}
    options = list(base.get("build_options") or [])

    def recipe_with(sha: str, opts: list[str]) -> Recipe:
        data = copy.deepcopy(p.data)
        srcs = [s for s in data.get("sources", []) if s.get("install") != "apex"]
        data["sources"] = [*srcs, {**base, "sha": sha, "build_options": opts, "why": "candidate"}]
        data["undecided"] = []
        return Recipe.model_validate(data)

    unknown_date = _unknown_apex_date(p, base)
    choice = choose_apex(base.get("sha"), options, recipe_with, p.target, p.facts, unknown_date)
    new = {**base, "sha": choice.sha, "build_options": choice.options}
    if src_i is None:
        new["why"] = (f"the published environment's Apex ({published_env(p.recipe)}) is not on the node; built from "
                      f"{choice.sha[:8]} ({choice.date}), the first known commit no Apex row refuses on {p.stack.label()}")
        new["source"] = {"url": f"https://github.com/NVIDIA/apex/commit/{choice.sha}", "sha": choice.sha}
        p.data.setdefault("sources", []).append(new)
        p.deviate("apex-built-from-source", f"Apex {pkg.version} preinstalled in {published_env(p.recipe)}",
                  "the node has no Apex", f"Apex {choice.sha[:8]} built with {' '.join(choice.options)} through "
                  "envbuild's Apex path (CUDA-aware check, arch list and parallelism from the node)",
                  f"https://github.com/NVIDIA/apex/commit/{choice.sha}",
                  ["envbuild.port.apex:choose_apex", "envbuild.patches.apex_build:install_command"],
                  [TEST + "test_port_builds_the_apex_an_image_carried"])
    elif not choice.kept:
        new["why"] = (f"{base.get('why', '').strip()} Moved by envbuild port to {choice.sha[:8]} ({choice.date}): "
                      f"the first known commit after {str(base.get('sha'))[:8]} that no Apex row refuses on "
                      f"{p.stack.label()}.").strip()
        new["source"] = {"url": f"https://github.com/NVIDIA/apex/commit/{choice.sha}", "sha": choice.sha}
        if base.get("ref") == base.get("sha"):  # a ref naming the old commit itself would not hold the new one
            new["ref"] = choice.sha
        p.data["sources"][src_i] = new
        unknown = (f"{str(base.get('sha'))[:8]} (committed {unknown_date}, read in the mirror) is not in "
                   "envbuild/compat/commits.py, so no date-based Apex row (torch._six, torch.library, nvcc 13) "
                   "and not the plan's build path can reason about it; to keep it, add it with its date to an "
                   "apex_commits.yaml (docs/port.md, A site's own rows)" if unknown_date else "")
        p.deviate(f"apex-{str(base.get('sha'))[:8]}-to-{choice.sha[:8]}", f"Apex {base.get('sha')}",
                  "; ".join([unknown] * bool(unknown)
                            + [f"{sha[:8]}: {', '.join(m)}" for sha, m in choice.refused.items()]),
                  f"Apex {choice.sha} ({choice.date}), the first commit of envbuild/compat/commits.py after it that "
                  "passes every Apex row", f"https://github.com/NVIDIA/apex/commit/{choice.sha}",
                  ["envbuild.port.apex:choose_apex", "envbuild.compat.rules_apex:_apex_torch_six"],
                  [TEST + "test_port_moves_apex_by_the_apex_rows"]
                  + ["tests/draft_port/test_draft_port_unseen.py::"
                     "test_the_filled_draft_ports_to_a_feasible_variant"] * bool(unknown))
    if choice.dropped:
        p.deviate("apex-options-removed", f"Apex build options {' '.join(options)}",
                  f"{', '.join(choice.dropped)} no longer exist at {choice.sha[:8]} (envbuild/patches/apex_options.py)",
                  f"built with {' '.join(choice.options)}", "https://github.com/NVIDIA/apex/pull/2016",
                  ["envbuild.port.apex:options_at", "envbuild.patches.apex_options:validate_options"],
                  [TEST + "test_port_moves_apex_by_the_apex_rows"])
    _apex_check_patch(p, new)


def _unknown_apex_date(p: Port, apex: dict) -> str | None:
    """The committer date (YYYY-MM-DD) in the mirror of a published Apex commit that
    envbuild's table lacks; None when the table knows it, or the mirror does not hold it."""
    sha = apex.get("sha")
    if not sha or any(c.sha.startswith(sha) or sha.startswith(c.sha) for c in apex_commits()) or p.mirror is None:
        return None
    repo = gitsrc.mirror_path(apex["url"], p.mirror)
    if repo is None or not gitsrc.has_commit(repo, sha):
        return None
    return gitsrc.commit_info(repo, sha)[0][:10]


def _apex_check_patch(p: Port, apex: dict) -> None:
    """The published apex-cuda-check patch stays when it recognizes the chosen commit's check
    (read in the mirror); it goes, said, when it does not."""
    from envbuild.patches.apex import neutralize_apex_cuda_check

    patches = p.data.get("patches", [])
    mine = [q for q in patches if q.get("component") == apex["name"] and q.get("kind") == "apex-cuda-check"]
    if not mine:
        return
    tree = open_tree(p, apex["name"], apex["url"], apex["sha"])
    if tree is None:
        p.notes.append(f"apex-cuda-check kept unread: {p.found.unread.get(apex['name'])}")
        return
    status, _, detail = neutralize_apex_cuda_check(tree.read("setup.py") or "")
    if status in ("applied", "already-applied", "not-needed"):
        return
    p.data["patches"] = [q for q in patches if q not in mine]
    p.deviate("apex-cuda-check-dropped", "patch apex-cuda-check on Apex's setup.py",
              f"at {apex['sha'][:8]} the check is not one envbuild knows: {detail}",
              "no patch: the check runs as Apex wrote it", "https://github.com/NVIDIA/apex/pull/323",
              ["envbuild.patches.apex:neutralize_apex_cuda_check", "envbuild.port.sources:port_apex"],
              [TEST + "test_port_moves_apex_by_the_apex_rows"])
