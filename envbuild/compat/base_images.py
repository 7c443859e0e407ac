"""Base images for container renders: a table of rows, each with what the image provides and
where that is written down.

The choice (``choose``) is: ``--base IMAGE`` when given; else the recipe's
``environment.base_image`` (NGC PyTorch images for the container recipes); else the NVIDIA
CUDA devel image matching the torch wheel's CUDA (``cu113`` -> CUDA 11.3.1 on Ubuntu 20.04);
else, for a CPU torch, a Debian python image of the recipe's Python.

A row also says which facts a node *inside* the image has (OS, nvcc, where the recipe's Python
is) and which apt packages the image still needs before the plan's steps can run (the CUDA
devel images carry no Python). A ``--base`` image is taken as it is: it must provide the
recipe's Python with venv (and git when the recipe has git sources). A row names a tag, not a
digest; ``--base NAME@sha256:HEX`` pins the image by content, and the render's labels say which.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

CUDA_TAGS = "https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc/supported-tags.md"
CUDA_EOL = "https://gitlab.com/nvidia/container-images/cuda/-/blob/master/doc/support-policy.md"
NGC_NOTES = "https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/rel-{}.html"
PY_IMAGES = "https://hub.docker.com/_/python"


@dataclass(frozen=True)
class BaseImage:
    image: str
    os_id: str
    os_version: str
    nvcc: str | None  # CUDA toolkit in the image (devel images), None without one
    pythons: tuple[str, ...]  # Python minors the image has or apt installs (first: the default)
    python_path: str  # "{v}" is the minor: where the recipe's Python is in the image
    apt_python: bool  # the recipe's Python comes from apt (python3.X, -venv, -dev)
    source: str
    why: str = ""
    provides: tuple[str, ...] = field(default_factory=tuple)  # packages the image ships (torch...)

    @property
    def digest(self) -> str | None:
        """The content digest the reference pins (``NAME@sha256:HEX``), None for a tag: a tag
        may be moved or deleted by its registry. No row records a digest: none was read from a
        registry (none is reachable where the rows were written); ``--base NAME@sha256:HEX``
        pins one."""
        _, _, digest = self.image.partition("@")
        hexpart = digest.removeprefix("sha256:")
        return digest if digest.startswith("sha256:") and len(hexpart) == 64 and all(
            c in "0123456789abcdef" for c in hexpart) else None


def _cuda(version: str, ubuntu: str, pythons: tuple[str, ...], cudnn: str = "cudnn8") -> BaseImage:
    return BaseImage(image=f"nvidia/cuda:{version}-{cudnn}-devel-ubuntu{ubuntu}", os_id="ubuntu",
                     os_version=ubuntu, nvcc=".".join(version.split(".")[:2]), pythons=pythons,
                     python_path="/usr/bin/python{v}", apt_python=True, source=CUDA_TAGS,
                     why=f"CUDA {version} devel (nvcc for extension builds) on Ubuntu {ubuntu}; "
                         f"Python from Ubuntu's apt. NVIDIA deletes end-of-life tags ({CUDA_EOL}): "
                         f"pass --base when the tag is gone")


# torch wheel CUDA variant -> devel image of the same CUDA. Ubuntu 20.04 has Python 3.8 and 3.9
# in its archive, 22.04 has 3.10 and 3.11, 24.04 has 3.12.
CUDA_ROWS: dict[str, BaseImage] = {
    "cu102": _cuda("10.2", "18.04", ("3.6", "3.7", "3.8"), cudnn="cudnn8"),
    "cu111": _cuda("11.1.1", "20.04", ("3.8", "3.9")),
    "cu113": _cuda("11.3.1", "20.04", ("3.8", "3.9")),
    "cu115": _cuda("11.5.2", "20.04", ("3.8", "3.9")),
    "cu116": _cuda("11.6.2", "20.04", ("3.8", "3.9")),
    "cu117": _cuda("11.7.1", "22.04", ("3.10", "3.11")),
    "cu118": _cuda("11.8.0", "22.04", ("3.10", "3.11")),
    "cu121": _cuda("12.1.1", "22.04", ("3.10", "3.11")),
    "cu124": _cuda("12.4.1", "22.04", ("3.10", "3.11"), cudnn="cudnn"),
    "cu126": _cuda("12.6.3", "24.04", ("3.12",), cudnn="cudnn"),
    "cu128": _cuda("12.8.1", "24.04", ("3.12",), cudnn="cudnn"),
    "cu130": _cuda("13.0.0", "24.04", ("3.12",), cudnn="cudnn"),
}

# NGC PyTorch images named by recipes (environment.base_image): what their release notes say.
NGC_ROWS: dict[str, BaseImage] = {
    "nvcr.io/nvidia/pytorch:22.02-py3": BaseImage(
        image="nvcr.io/nvidia/pytorch:22.02-py3", os_id="ubuntu", os_version="20.04", nvcc="11.6",
        pythons=("3.8",), python_path="python{v}", apt_python=False,
        source=NGC_NOTES.format("22-02"), provides=("torch", "apex"),
        why="the recipe's published container: Ubuntu 20.04, CUDA 11.6.0, Python 3.8, "
            "PyTorch 1.11.0a0+17540c5 and Apex preinstalled"),
    "nvcr.io/nvidia/pytorch:23.04-py3": BaseImage(
        image="nvcr.io/nvidia/pytorch:23.04-py3", os_id="ubuntu", os_version="20.04", nvcc="12.1",
        pythons=("3.8",), python_path="python{v}", apt_python=False,
        source=NGC_NOTES.format("23-04"), provides=("torch", "apex", "transformer_engine"),
        why="the recipe's published container: Ubuntu 20.04, CUDA 12.1.0, Python 3.8, "
            "PyTorch 2.1.0a0+fe05266, Apex and Transformer Engine preinstalled"),
}


def python_image(minor: str) -> BaseImage:
    """The Debian python image of ``minor`` (CPU torch)."""
    return BaseImage(image=f"python:{minor}-slim-bookworm", os_id="debian", os_version="12",
                     nvcc=None, pythons=(minor,), python_path="/usr/local/bin/python{v}",
                     apt_python=False, source=PY_IMAGES,
                     why=f"CPU torch: the official Python {minor} image on Debian 12 (slim)")


def given(image: str, python: str) -> BaseImage:
    """A ``--base`` image: known rows keep their facts, others are taken as providing
    ``python{minor}`` on PATH."""
    name = image.partition("@")[0]  # a row's facts hold for its tag pinned by digest too
    known = NGC_ROWS.get(name) or next((r for r in CUDA_ROWS.values() if r.image == name), None)
    if known:
        return known if name == image else replace(known, image=image)
    return BaseImage(image=image, os_id="", os_version="", nvcc=None, pythons=(python,),
                     python_path="python{v}", apt_python=False, source="--base",
                     why=f"given with --base: it must provide Python {python} with venv "
                         f"(and git for git sources)")


def choose(recipe, torch_variant: str | None, base: str | None = None) -> BaseImage:
    """The base image of ``recipe``'s container render (see the module docstring)."""
    if base:
        return given(base, recipe.python)
    if recipe.environment.base_image:
        return NGC_ROWS.get(recipe.environment.base_image) or given(recipe.environment.base_image,
                                                                     recipe.python)
    if torch_variant and torch_variant in CUDA_ROWS:
        return CUDA_ROWS[torch_variant]
    return python_image(recipe.python)
