"""The variant's name, stack, environment and packages: the node's own torch (or the chosen
build), a venv over it, and each published package as the node has it."""

from __future__ import annotations

from envbuild.facts.model import NodeFacts
from envbuild.port.state import TEST, Port, arch_suffix, published_env
from envbuild.port.tables import canonical, not_installed
from envbuild.recipes.schema import Recipe
from envbuild.targets.schema import Target
from envbuild.versions import pinned


def preflight_problem(recipe: Recipe, target: Target, facts: NodeFacts) -> str:
    from envbuild.compat.check import preflight

    verdict = preflight(recipe, target, facts)
    if verdict.feasible:
        return f"{recipe.name} itself passes the preflight on {target.name}"
    return f"preflight of {recipe.name} on {target.name}: " + "; ".join(
        f"{v.rule}: {v.message}" for v in verdict.errors)


def same_torch(p: Port) -> bool:
    """Whether the stack is the published torch and Python (a port to the published hardware)."""
    old = p.recipe.package("torch")
    return bool(old) and old.version.split("+")[0] == p.stack.torch and (old.cuda or p.stack.cuda) == p.stack.cuda \
        and p.recipe.python == p.stack.python


def port_header(p: Port) -> None:
    r, s = p.recipe, p.stack
    suffix = arch_suffix(s)
    rest = {k: v for k, v in p.data.items() if k not in ("schema", "name", "variant_of")}
    p.data.clear()
    p.data.update({"schema": 1, "name": f"{r.name}-{suffix}", "variant_of": r.name, **rest})
    p.data["title"] = f"{r.title}, ported to {p.target.name} ({s.label()})"
    p.data["description"] = (
        f"Drafted by `envbuild port {r.name} --target {p.target.name}` from {r.name}: the same setup at the "
        f"same commits, moved to {s.label()} ({s.why}). Every change is a deviation below; what port could "
        f"not decide is listed under undecided (check refuses the recipe until each is settled).")
    p.data.pop("default", None)
    p.data.pop("errata", None)  # the published setup's; corrected_by names hand-made variants
    p.data["targets"] = [p.target.name]
    p.data["python"] = s.python


def port_resolve_as_of(p: Port) -> None:
    """The day unpinned requirements resolve as of: the published one on the published stack, or
    where it does not predate the new stack's day (``node_stacks.yaml``, ``resolve_as_of``);
    else the stack's day (deviation ``resolve-as-of``). A stack without a day (a build of
    ``torch_builds.yaml``, a facts file) drops the published date: the lock's day then."""
    day, published = p.stack.resolve_as_of, p.data.get("resolve_as_of")
    if same_torch(p) or (published and day and str(published) >= day.date):
        return
    if day is None:
        if published:
            p.data.pop("resolve_as_of")
            p.notes.append(f"resolve_as_of {published} dropped: unpinned dependencies resolve as of the lock "
                           "(the published date predates the new stack's wheels)")
        return
    items = [(k, v) for k, v in p.data.items() if k != "resolve_as_of"]
    at = next((i + 1 for i, (k, _) in enumerate(items) if k == "python"), len(items))
    p.data.clear()
    p.data.update([*items[:at], ("resolve_as_of", day.date), *items[at:]])  # after python, as recipes write it
    unpinned = [q["name"] for q in p.data.get("packages", [])
                if not q.get("preinstalled") and not pinned(str(q["version"]))]
    what = (f"its unpinned requirements ({', '.join(unpinned)}) and the dependencies of what it installs"
            if unpinned else "the dependencies of what it installs")
    old = p.recipe.package("torch")
    was = f"torch {old.version}, Python {p.recipe.python}" if old else f"Python {p.recipe.python}"
    p.deviate("resolve-as-of",
              f"resolve_as_of {published}: {p.recipe.name}'s unpinned requirements resolve as of then"
              if published else f"no resolve_as_of: {p.recipe.name}'s unpinned requirements resolve as of the lock",
              (f"{what} would resolve as of {published}, before the new stack ({p.stack.label()}): the releases "
               f"of that day were made for the published one ({was}), and compiled ones that predate Python "
               f"{p.stack.python} have no wheels for it" if published else
               f"{what} would resolve as of whatever day the lock is made, where every shipped recipe resolves "
               "as of a fixed date"),
              f"resolve_as_of {day.date}, {day.why}: they resolve to the releases of that day, locked with their "
              "hashes", day.source, ["envbuild.port.environment:port_resolve_as_of", "envbuild.lock.make:make_lock"],
              [TEST + "test_port_resolves_as_of_the_stacks_day", "tests/lock/test_lock_resolve.py::"
               "test_resolve_as_of_limits_versions"])


def port_torch(p: Port) -> None:
    r, s = p.recipe, p.stack
    old = r.package("torch")
    if same_torch(p):
        return
    pkgs = [q for q in p.data.get("packages", []) if q["name"].lower() != "torch"]
    if s.node_own:
        torch = {"name": "torch", "version": s.torch, "preinstalled": True,
                 "why": f"{s.why}; replaces the published torch "
                        f"{(old.version + ('+' + old.cuda if old.cuda else '')) if old else '(none)'}",
                 "source": {"url": s.source}}
    else:
        b = s.build
        torch = {"name": "torch", "version": s.torch, "cuda": s.cuda, "why": s.why, "source": {"url": s.source}}
        if b and b.index:
            torch.update({"index": b.index, "index_kind": b.index_kind})
    p.data["packages"] = [torch, *pkgs]
    published = (f"torch {old.version}{'+' + old.cuda if old and old.cuda else ''}, Python {r.python}"
                 if old else f"no torch pinned, Python {r.python}")
    p.deviate(f"torch-{s.torch}", published, preflight_problem(r, p.target, p.facts),
              f"{s.label()}: {s.why}.", s.source,
              ["envbuild.port.stack:choose_stack", "envbuild.compat.check:preflight"],
              [TEST + "test_port_uses_the_nodes_own_torch", TEST + "test_port_picks_the_closest_build_for_the_arch"])


def port_environment(p: Port) -> None:
    env = dict(p.data.get("environment") or {"kind": "venv"})
    before = dict(env)
    if p.stack.node_own:
        env = {"kind": "venv", "system_site_packages": True}
    elif env.get("kind") in ("container", "module-venv"):
        env = {"kind": "venv"}
    if env == before:
        return
    p.data["environment"] = env
    if before.get("base_image") and not env.get("base_image"):
        for i, src in enumerate(p.data.get("sources", [])):
            needs = src.pop("build_needs_image", None)
            if needs:
                p.leave(f"sources[{i}].build", f"{src['name']}'s build commands ran inside {before['base_image']}, "
                        f"whose files they need ({' '.join(needs.split())}); {p.target.name} is not that image: "
                        "say where the node has them, or carry them (data:, patches)")
    where = p.stack.prefix or "the node's Python"
    base = before.get("base_image") or before.get("conda_module")
    # only the pins the published environment has are named (a plain venv pins neither)
    pins = [f"{tool} {before[tool]}" for tool in ("pip", "setuptools") if before.get(tool)]
    problem = (f"the published environment ({before.get('kind')}{', ' + str(base) if base else ''}"
               f"{''.join(', ' + pin for pin in pins)}) brings or pins what the new stack replaces")
    if not (base or pins):  # a plain venv: it brings nothing, it does not see the node's torch
        problem = f"the published environment (a plain {before.get('kind')}) does not see {where}, whose torch the new stack uses"
    p.deviate("environment", f"environment: {before}", problem,
              f"a venv{' with --system-site-packages over ' + where if p.stack.node_own else ''}; pip and "
              "setuptools as the node has them"
              + (f" (the published {' and '.join(pins)} were pinned for the published stack)" if pins else ""),
              p.stack.source, ["envbuild.port.environment:port_environment", "envbuild.plan.build:build_plan"],
              [TEST + "test_port_uses_the_nodes_own_torch"])


def port_packages(p: Port) -> None:
    """Each published package: the node's where it has one; a package the published image or
    module carried and the node lacks becomes a PyPI pin at its stated version, or unpinned
    where none is stated (the lock pins what it resolves for the new stack), or is left out
    where ``packages.yaml`` says its only release is a CUDA source build (``not_installed``)."""
    out, moved, gone, unpinned, left_out = [], [], [], [], []
    for pkg in p.data.get("packages", []):
        name = pkg["name"].lower()
        if name == "torch" or name == "apex":
            if name == "torch":
                out.append(pkg)
            continue
        have = p.stack.packages.get(name.replace("_", "-"))
        if have and p.stack.node_own:
            if str(pkg["version"]) != have or not pkg.get("preinstalled"):
                moved.append(f"{pkg['name']} {pkg['version']} -> {have}")
            out.append({"name": pkg["name"], "version": have, "preinstalled": True,
                        "why": f"on the node ({p.stack.prefix or 'its Python'}); the published pin was {pkg['version']}",
                        "source": {"url": p.stack.source}})
            continue
        if pkg.get("preinstalled"):
            row = next((r for r in not_installed() if canonical(r.package) == canonical(name)), None)
            if row is not None:
                left_out.append((pkg, row))
                continue
            new = {k: v for k, v in pkg.items() if k != "preinstalled"}
            out.append(new)
            gone.append(pkg["name"])
            if not pinned(str(pkg["version"])):
                unpinned.append(pkg["name"])
                new["why"] = (f"{str(pkg.get('why', '')).strip()} The node lacks it and the published environment "
                              f"states no version: unpinned, the lock pins the release it resolves for "
                              f"{p.stack.label()} (envbuild port).").strip()
            continue
        out.append(pkg)
    p.data["packages"] = out
    if moved:
        p.deviate("packages-from-node", "; ".join(moved[:40]),
                  f"the published pins are for Python {p.recipe.python} and the published torch; the node's "
                  f"environment already has these packages, which the venv sees (system site-packages)",
                  "the node's versions, preinstalled (never reinstalled; the lock records them as provided): "
                  + ", ".join(moved), p.stack.source, ["envbuild.port.environment:port_packages",
                                                        "envbuild.plan.packages:locked_packages"],
                  [TEST + "test_port_uses_the_nodes_own_torch"])
    if gone:
        p.deviate("packages-not-on-node", f"{', '.join(gone)}: provided by {published_env(p.recipe)}",
                  f"the node does not have them ({p.stack.source})",
                  "installed from PyPI at the published version where one is stated"
                  + (f"; unpinned where none is ({', '.join(unpinned)}): `envbuild lock` pins the release it "
                     f"resolves for {p.stack.label()} and records it with its hashes, as for any unpinned "
                     "requirement (envbuild draft writes one as '*')" if unpinned else ""),
                  p.stack.source, ["envbuild.port.environment:port_packages", "envbuild.lock.packages:sort_packages"],
                  [TEST + "test_port_pins_what_the_image_carried_or_leaves_it_to_the_lock"])
    for pkg, row in left_out:
        gone_modules = set(row.modules)
        if p.data.get("import_check"):
            p.data["import_check"] = [m for m in p.data["import_check"] if m.split(".")[0] not in gone_modules]
        p.deviate(f"{canonical(row.package)}-not-installed", f"{pkg['name']} {pkg['version']}: provided by "
                  f"{published_env(p.recipe)}", f"the node does not have it; {row.why}",
                  f"not installed (and {', '.join(row.modules)} left out of import_check); the setup's imports of "
                  "it are guarded by the fix rows whose `when` names it absent (envbuild/port/data/fixes.yaml)",
                  row.source, ["envbuild.port.environment:port_packages", "envbuild.port.tables:not_installed"],
                  [TEST + "test_port_leaves_out_what_only_a_cuda_build_would_replace"])
