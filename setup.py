"""The wheel's layout, the one part of the build that pyproject.toml cannot state (issue 20).

The source tree keeps the design card's top level: ``playbooks/`` (provision.yml, ansible.cfg
and the collection envbuild.node) and ``lockfiles/`` (the shipped recipes' locks) beside
``envbuild/``. setuptools' ``package_dir`` maps them into the wheel as the packages
``envbuild.playbooks`` and ``envbuild.lockfiles``, where ``envbuild.shipped`` finds them in an
installed envbuild (pyproject's package-data names their files). pyproject's package finder
cannot list a package mapped from another folder, so the package list is made here: envbuild's
own packages plus the two mapped folders. Everything else is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

MAPPED = {"envbuild.playbooks": "playbooks", "envbuild.lockfiles": "lockfiles"}

setup(packages=find_namespace_packages(include=["envbuild", "envbuild.*"]) + list(MAPPED),
      package_dir=MAPPED)
