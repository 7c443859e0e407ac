"""The import proof inside a container recipe's image (tests/testbed/test_image_proof.py): the image
built with podman from the recipe's rendered Dockerfile over a stand-in of its base image, then
the entry scripts' imports imported in a container of it, as the CPU import proof does in a
venv (``envbuild.testbed.importproof``).

The stand-in base (``standin_rootfs``, ``import_standin``) holds what the published image
provides that can be had here, each part named in its labels:
- the chroot testbed's Debian bookworm rootfs (``envbuild.testbed.chroot.rootfs``) for the
  image's Ubuntu 20.04: apt, git, a shell;
- the recipe's Python with the base packages the lock names as preinstalled, at their stand-in
  versions: the base the CPU import proof builds (``importproof.cached_base``: pyenv's build of
  that minor, the packages from PyPI), put at /usr/local, where ``python3.X`` is on PATH as in
  the image;
- a local apt repository with an empty ``python3.X-venv``: Ubuntu's package that the
  Dockerfile's image-tooling step installs. The stand-in's Python already has venv and
  ensurepip, and Debian 12 has no ``python3.8-venv`` to install.
It is tagged with the published image's name inside the proof's own podman storage, so the
Dockerfile builds as rendered, ``FROM`` line included (``--pull=never``: nothing is pulled).

The Dockerfile is rendered from the image plan (``envbuild.plan.image.image_plan``) cut to
what a CPU build machine can run (``cpu_image_plan``): a build step that needs the base image
(``build_needs_image``: MegatronApp's extension needs the image's rdma-core and nvcc) and Apex's
CUDA build are left out, each named. Git sources come from the git mirror, each repository
mounted read-only for the build and reached through git's ``url.<base>.insteadOf`` in a
gitconfig mounted at /etc/gitconfig, so the Dockerfile's clone lines run unchanged. (A mirror
snapshot that lacks files of the pinned commit itself, which the CPU proof checks out sparse,
fails the build's checkout, naming the object.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envbuild.gitsrc import github_slug, mirror_path
from envbuild.plan.params import ApexBuildParams, BuildParams, ImagePlan
from envbuild.testbed.importproof import PROBE, Unexercised

STANDIN_APT = "/opt/envbuild-standin/apt"  # the local apt repository in the stand-in
MIRROR_IN_BUILD = "/envbuild-mirror"  # where the build sees the git mirror's repositories
SAFE_URL = re.compile(r"[A-Za-z0-9._~:/@+-]+")  # no quote, backslash, space or newline


@dataclass(frozen=True)
class CutImage:
    """The image plan a CPU build machine runs, and what it leaves out."""

    image: ImagePlan
    left: list[Unexercised]
    unbuilt: dict[str, str]  # module -> the left-out build step that makes it


def cpu_image_plan(ip: ImagePlan, recipe) -> CutImage:
    """``ip`` (an image plan of ``recipe``) without the steps that need the base image's GPU
    stack (see the module doc)."""
    kept, left, unbuilt = [], [], {}
    for step in ip.plan.steps:
        if isinstance(step.params, ApexBuildParams):
            left.append(Unexercised(step.id, "Apex's C++/CUDA extensions need nvcc and a CUDA torch"))
            continue
        src = recipe.source(step.params.name) if isinstance(step.params, BuildParams) else None
        if src is not None and src.build_needs_image:
            left.append(Unexercised(step.id, f"runs only in {recipe.environment.base_image}: it "
                                             f"needs {src.build_needs_image}"))
            for module in src.build_provides:
                unbuilt[module] = f"which the left-out {step.id} makes"
            continue
        kept.append(step)
    cut = ip.model_copy(update={"plan": ip.plan.model_copy(update={"steps": kept})})
    return CutImage(cut, left, unbuilt)


def empty_deb(folder: Path, name: str, version: str, description: str) -> None:
    """``folder``: a flat apt repository (``deb [trusted=yes] file:FOLDER ./``) holding one
    package ``name`` with no files and no dependencies."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f".{name}"
    (src / "DEBIAN").mkdir(parents=True, exist_ok=True)
    control = (f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: envbuild\n"
               f"Priority: optional\nSection: python\nDescription: {description}\n")
    (src / "DEBIAN" / "control").write_text(control)
    deb = folder / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(src), str(deb)], check=True,
                   capture_output=True)
    shutil.rmtree(src)
    data = deb.read_bytes()
    (folder / "Packages").write_text(control.replace("Description:", f"Filename: ./{deb.name}\n"
                                     f"Size: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n"
                                     "Description:", 1))


def standin_rootfs(rootfs: Path, base_prefix: Path, python: str, out: Path) -> Path:
    """``out``: ``rootfs`` with ``base_prefix`` (a Python installation) at /usr/local and the
    local apt repository (see the module doc). Files are hard links of the originals (new files
    are written beside them, none is changed in place); ``out`` must not exist."""
    def link(src: str, dst: str) -> None:
        os.link(src, dst, follow_symlinks=False)

    shutil.copytree(rootfs, out, symlinks=True, copy_function=link)
    shutil.copytree(base_prefix, out / "usr" / "local", symlinks=True, copy_function=link,
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns(".envbuild-base"))
    empty_deb(out / STANDIN_APT.lstrip("/"), f"python{python}-venv", "0envbuild1",
              f"stand-in for Ubuntu's python{python}-venv: the stand-in's Python {python} at "
              "/usr/local has venv and ensurepip")
    (out / "etc/apt/sources.list.d/envbuild-standin.list").write_text(
        f"deb [trusted=yes] file:{STANDIN_APT} ./\n")
    # libpython of the stand-in's Python, found by the loader under /usr/local/lib (the copy's
    # RUNPATH names the folder it was built in); ldconfig replaces the cache file, it does not
    # write into the hard-linked original
    subprocess.run(["ldconfig", "-r", str(out)], check=True)
    return out


def import_standin(podman, folder: Path, tag: str, labels: dict[str, str]) -> None:
    """Import the assembled ``folder`` as image ``tag`` with ``labels``."""
    changes = [f"LABEL {key}={json.dumps(' '.join(value.split()))}" for key, value in sorted(labels.items())]
    podman.import_rootfs(folder, tag, [*changes, "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:"
                                       "/usr/bin:/sbin:/bin"], timeout=1800)


def mirror_mounts(urls: list[str], mirror: str, folder: Path) -> list[str]:
    """``podman build`` options that let the build's ``git clone URL`` read the mirror: each
    repository mounted read-only under MIRROR_IN_BUILD and a gitconfig (written in ``folder``)
    whose insteadOf rewrites the URL to it. Raises LookupError naming a URL the mirror lacks."""
    args, config = [], []
    for url in sorted(set(urls)):
        if not SAFE_URL.fullmatch(url):  # recipe data, written into a gitconfig value
            raise ValueError(f"not a plain URL, so not written into a gitconfig: {url!r}")
        repo, slug = mirror_path(url, mirror), github_slug(url)
        if repo is None or slug is None:
            raise LookupError(url)
        inside = f"{MIRROR_IN_BUILD}/{slug[0]}/{slug[1]}.git"
        args += ["-v", f"{Path(repo).resolve()}:{inside}:ro"]
        # a path, not file://: git copies a local repository's objects as they are, while the
        # pack protocol walks the whole history and stops at the first object a snapshot lacks
        config.append(f'[url "{inside}"]\n\tinsteadOf = {url}\n')
    gitconfig = folder / "gitconfig"
    gitconfig.write_text("".join(config) + "[safe]\n\tdirectory = *\n")
    return [*args, "-v", f"{gitconfig}:/etc/gitconfig:ro"]


def import_in_image(podman, tag: str, python: str, modules: list[str], cwd: str,
                    paths: list[str]) -> dict:
    """``{module: {"ok": bool, ...}}`` (``importproof.PROBE``), imported in a container of
    ``tag`` without network, from ``cwd`` with ``paths`` first on sys.path."""
    out = podman("run", "--rm", "--network=none", "-w", cwd, "-e", f"PYTHONPATH={':'.join(paths)}",
                 "-e", "PYTHONDONTWRITEBYTECODE=1", "-e", "WANDB_MODE=disabled", "-e", "HOME=/tmp",
                 tag, python, "-c", PROBE, *modules, timeout=900, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("IMPORT-PROOF ")), None)
    if line is None:
        raise RuntimeError(f"the import probe did not report (rc {out.returncode}): {out.stderr[-2000:]}")
    return json.loads(line.removeprefix("IMPORT-PROOF "))
