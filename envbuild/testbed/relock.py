"""A shipped recipe and its committed lock, copied with one package at another version.

For tests of what a changed lock does (an image rebuilt, a step run again). A recipe that pins
the package names its version, so the lock alone cannot change it and stay current
(``envbuild.lock.check``): both are copied, the recipe with the new version, the lock with the
new version, file name, hash and the copied recipe's digest.

    url, sha = pypi_wheel("tqdm", "4.67.1")
    rec_path, lock_path = with_version(tmp, "cpu-reference", "local", "tqdm", "4.67.1", sha, url)
    envbuild provision --recipe rec_path --lock lock_path ...
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from envbuild.shipped import CHECKOUT

ROOT = CHECKOUT


def pypi_wheel(name: str, version: str, index: str = "https://pypi.org/simple") -> tuple[str, str]:
    """(url, sha256) of the ``py3-none-any`` wheel of ``name==version`` on the index's simple
    page (the hash is in each link's fragment)."""
    with urllib.request.urlopen(f"{index}/{name}/", timeout=30) as page:
        text = page.read().decode()
    want = rf'href="([^"#]*/{re.escape(name)}-{re.escape(version)}-py3-none-any\.whl)#sha256=([0-9a-f]{{64}})"'
    m = re.search(want, text)
    if not m:
        raise LookupError(f"no {name} {version} py3-none-any wheel on {index}")
    return m.group(1), m.group(2)


def with_version(folder: Path, recipe: str, target: str, package: str, version: str,
                 sha256: str, url: str | None = None) -> tuple[Path, Path]:
    """(recipe copy, lock copy) under ``folder`` with ``package`` at ``version`` (see above)."""
    from envbuild.catalog import digest
    from envbuild.lock.check import check_lock_file
    from envbuild.lock.location import SHIPPED_LOCKDIR, lock_path
    from envbuild.lock.schema import normalize
    from envbuild.lock.serialize import dump_lock, regenerate_command
    from envbuild.recipes import load_recipe
    from envbuild.targets import load_target

    original = load_recipe(recipe)
    tgt = load_target(target)
    lock = check_lock_file(lock_path(recipe, target, SHIPPED_LOCKDIR), original, tgt)
    old = lock.package(package)
    if old is None:
        raise LookupError(f"{package} is not in the lock of {recipe} for {target}")
    rec_text = (ROOT / "envbuild" / "recipes" / "data" / f"{recipe}.yaml").read_text()
    pinned = re.compile(rf'(- name: {re.escape(package)}\n\s+version: )"?{re.escape(old.version)}"?')
    if pinned.search(rec_text):
        rec_text = pinned.sub(lambda m: f'{m.group(1)}"{version}"', rec_text, count=1)
    folder.mkdir(parents=True, exist_ok=True)
    rec_path = folder / f"{recipe}.yaml"
    rec_path.write_text(rec_text)
    new_rec = load_recipe(str(rec_path))
    dist = old.dist.model_copy(update={"filename": old.dist.filename.replace(old.version, version),
                                       "url": url or old.dist.url.replace(old.version, version),
                                       "sha256": sha256})
    new_pkg = old.model_copy(update={"version": version, "dist": dist,
                                     **({"requested": version} if getattr(old, "requested", None) else {})})
    packages = [new_pkg if normalize(p.name) == normalize(package) else p for p in lock.packages]
    recipe_ref = lock.recipe.model_copy(update={"digest": digest(new_rec)})
    new_lock = lock.model_copy(update={"packages": packages, "recipe": recipe_ref})
    out = folder / f"{target}.lock"
    out.write_text(dump_lock(new_lock, regenerate_command(recipe, target)))
    check_lock_file(out, new_rec, tgt)  # current for the copied recipe
    return rec_path, out
