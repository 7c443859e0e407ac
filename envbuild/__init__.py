"""envbuild: pinned manifests, lockfiles, provisioning and verification for published
large-model training baselines.

Data flow: recipe (+ target profile + node facts) -> preflight -> lock -> plan -> execute
(ansible-runner / Fabric) -> smoke -> report / verify.
"""

__version__ = "0.1.0"
