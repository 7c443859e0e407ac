"""Proof by import inside a container recipe's image: the image built with podman from the
recipe's rendered Dockerfile over a stand-in of its published base image, then every module its
entry scripts import, imported in a container of it (``envbuild.testbed.imageproof`` says what
the stand-in holds and what the build leaves out).

The Dockerfile clones the recipe's sources from GitHub, which CI cannot reach: the proof runs
where a git mirror holds them (``ENVBUILD_GIT_MIRROR``) and skips, saying so, elsewhere. Its
runs are recorded in docs/results/image-proofs.md (those were made over bases pip installed,
before the bases were installed by uv). It shares the CPU import proof's base stand-ins
(``importproof.cached_base``) and its uv and pip caches; each image is built in podman storage
of its own, removed afterwards (several GB each).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from envbuild.lock import lock_path, read_lock
from envbuild.recipes import all_recipes
from envbuild.render import dockerfile
from envbuild.render.context import write
from envbuild.plan.image import image_plan
from envbuild.scriptimports import read_fact
from envbuild.testbed.imageproof import cpu_image_plan, import_in_image, import_standin, mirror_mounts
from envbuild.testbed.imageproof import standin_rootfs
from envbuild.testbed.podman import build_steps
from envbuild.testbed.importproof import cached_base, interpreter, judge, stand_ins
from envbuild.testbed.proofrecord import cpu_target

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.proof]

RECIPES = [r for r in all_recipes() if r.environment.base_image and r.entry_scripts]
TAG = "localhost/envbuild-image-proof/{}:test"


def _why_not(recipe, mirror: str | None) -> str | None:
    from envbuild.gitsrc import mirror_path
    from envbuild.testbed.chroot import why_unavailable as no_rootfs
    from envbuild.testbed.podman import why_unavailable as no_podman

    if why := no_podman() or no_rootfs():
        return why
    if interpreter(recipe.python) is None:
        return f"Python {recipe.python} is not on this machine"
    lacking = [s.url for s in recipe.sources if mirror_path(s.url, mirror) is None]
    if lacking:
        return (f"the Dockerfile clones {', '.join(lacking)}, which no git mirror here holds "
                "(CI has no GitHub): set ENVBUILD_GIT_MIRROR to build the image")
    return None


@pytest.mark.parametrize("recipe", RECIPES, ids=[r.name for r in RECIPES])
def test_entry_script_imports_inside_the_image(recipe, tmp_path, monkeypatch, record_property):
    from envbuild.testbed.chroot import rootfs
    from envbuild.testbed.podman import Podman

    mirror = os.environ.get("ENVBUILD_GIT_MIRROR")
    if why := _why_not(recipe, mirror):
        pytest.skip(f"{recipe.name}: {why}")
    target = cpu_target(recipe)
    lock = read_lock(lock_path(recipe.name, target.name))
    fact = read_fact(recipe.name)
    assert fact is not None, f"run envbuild imports {recipe.name} --git-mirror DIR"
    cache = Path(os.environ.get("ENVBUILD_CACHE_DIR") or Path.home() / ".cache" / "envbuild")
    monkeypatch.setenv("PIP_CACHE_DIR", str(cache / "import-proof-pip"))
    monkeypatch.setenv("UV_CACHE_DIR", str(cache / "import-proof-uv"))
    stand = stand_ins(lock)
    started = time.monotonic()
    base_python, _ = cached_base(interpreter(recipe.python), stand.base, as_venv=False)

    cut = cpu_image_plan(image_plan(recipe, target, lock,
                                    lock_text=lock_path(recipe.name, target.name).read_text()), recipe)
    context = tmp_path / "context"
    write(dockerfile.render(cut.image), context)
    base = cut.image.base
    pm = Podman(tmp_path / "podman")
    try:
        standin_rootfs(rootfs(), Path(base_python).parents[1], recipe.python, tmp_path / "standin")
        import_standin(pm, tmp_path / "standin", base.image, {
            "io.envbuild.standin.for": base.image,
            "io.envbuild.standin.source": base.source,
            "io.envbuild.standin.holds": f"Debian 12 rootfs; Python {recipe.python} (pyenv) at "
                                         f"/usr/local with {', '.join(stand.base)} from PyPI; "
                                         f"an empty python{recipe.python}-venv in a local apt repository"})
        based = time.monotonic() - started
        mounts = mirror_mounts([s.url for s in recipe.sources], mirror, tmp_path)
        tag = TAG.format(recipe.name)
        build = pm(*pm.build_args(context, tag)[:-1], *mounts, str(context), timeout=3600)
        built = time.monotonic() - started
        log = build.stdout + build.stderr
        steps = [text for text, _cached in build_steps(log)]
        installed = [ln.strip() for ln in log.splitlines() if ln.startswith("Successfully installed")]

        prefix = cut.image.prefix
        by_path = {s["path"]: s for s in fact["scripts"]}
        results = {}
        for script in fact["scripts"]:
            root = f"{prefix}/src/{script['component']}"
            here = str(Path(root) / Path(script["path"]).parent)
            results[script["path"]] = import_in_image(pm, tag, f"{prefix}/bin/python",
                                                      script["modules"] + script["optional"],
                                                      cwd=root, paths=[here, root])
    finally:
        pm.remove_all()
    verdict = judge(recipe, by_path, results, stand=stand, unbuilt=cut.unbuilt,
                    checked_out={s.name for s in recipe.sources}, patches_applied=True)
    left = cut.left + stand.left + verdict.left
    record_property("image_proof", json.dumps({
        "recipe": recipe.name, "target": target.name, "base": base.image, "base_s": round(based, 1),
        "build_s": round(built, 1), "proven": verdict.proven, "steps": steps, "installed": installed,
        "unexercised": [[u.what, u.why] for u in left]}))
    print(f"\n{recipe.name}: {verdict.proven} imports proven inside the image built from its "
          f"Dockerfile over the stand-in of {base.image} (stand-in {based:.0f} s, image "
          f"{built - based:.0f} s); not exercised: " + "; ".join(f"{u.what} ({u.why})" for u in left))
    print("build steps run:\n  " + "\n  ".join(s[:160] for s in steps) + "\n" + "\n".join(installed))
    assert not verdict.unproven, "imports that fail inside the image:\n" + "\n".join(verdict.unproven)
    assert verdict.proven > 0
