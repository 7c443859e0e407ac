"""The wheel's layout, the one part of the build that pyproject.toml cannot state (issue 20).

The source tree keeps the design card's top level: ``playbooks/`` (provision.yml, ansible.cfg
and the collection envbuild.node) and ``lockfiles/`` (the shipped recipes' locks) beside
``envbuild/``. setuptools' ``package_dir`` maps them into the wheel as the packages
``envbuild.playbooks`` and ``envbuild.lockfiles``, where ``envbuild.shipped`` finds them in an
installed envbuild (pyproject's package-data names their files). pyproject's package finder
cannot list a package mapped from another folder, so the package list is made here: envbuild's
own packages, less the test bed, plus the two mapped folders. Everything else is in pyproject.toml.

The test bed (``envbuild.testbed``: loopback sshd nodes, chroot nodes, podman, a Slurm cluster,
the import proofs) serves this checkout's tests and bench scripts and is not shipped; it stays
importable from the checkout (and from an editable install, which maps ``envbuild`` to the
checkout's folder).
"""

from setuptools import find_namespace_packages, setup

MAPPED = {"envbuild.playbooks": "playbooks", "envbuild.lockfiles": "lockfiles"}

NOT_SHIPPED = ["envbuild.testbed", "envbuild.testbed.*"]

setup(packages=find_namespace_packages(include=["envbuild", "envbuild.*"], exclude=NOT_SHIPPED) + list(MAPPED),
      package_dir=MAPPED)
