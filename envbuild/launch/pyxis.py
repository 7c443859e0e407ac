"""pyxis's rule for ``srun --container-image``: which names are squashfs files (pure).

pyxis treats an image as a path to a squashfs file on the node only when its name starts with
``.`` or ``/`` (``strspn(image, "./") > 0`` in ``enroot_container_create``); anything else is
an enroot URI and is pulled from a registry as ``docker://<image>``. So ``envbuild-x.sqsh`` is
pulled from Docker Hub, and ``./envbuild-x.sqsh`` or ``/prefix/envbuild-x.sqsh`` is the file.

    >>> is_squashfs_path("/envs/envbuild-a-slurm.sqsh"), is_squashfs_path("envbuild-a-slurm.sqsh")
    (True, False)
"""

from __future__ import annotations

SOURCE = ("https://github.com/NVIDIA/pyxis/blob/master/pyxis_slurmstepd.c (enroot_container_create: "
          "strspn(image, \"./\") > 0 is a squashfs path; tests/squashfs_image.bats runs ./ubuntu.sqsh)")
SQUASHFS_SUFFIXES = (".sqsh", ".squashfs", ".sqfs")


def is_squashfs_path(image: str) -> bool:
    """Whether pyxis reads ``image`` as a squashfs file (else: an enroot URI, pulled)."""
    return image[:1] in (".", "/")


def image_problem(image: str) -> str | None:
    """Why pyxis would not run ``image`` as the file its name says it is; None when it would."""
    if image.endswith(SQUASHFS_SUFFIXES) and not is_squashfs_path(image):
        return (f"pyxis pulls --container-image {image} from a registry (docker://{image}): it reads a "
                "squashfs file only from a name starting with '/' or './'")
    return None
