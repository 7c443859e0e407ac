"""Environment fingerprints: equal environments give equal hashes, whatever run made them.

A node's fingerprint is sha256 over canonical JSON of its observed state (hostname and the
shell's NCCL_/CUDA_ variables excluded) plus the lock digest. A run's fingerprint covers the
distinct node fingerprints, so run ids, timestamps and host names never enter it.
"""

from __future__ import annotations

from envbuild.facts.model import NodeFacts
from envbuild.fsio import canonical_json, sha256_text
from envbuild.observe.model import Observed


def node_fingerprint(observed: Observed, lock_digest: str | None) -> str:
    """sha256 of (observed state, lock digest) for one environment."""
    state = observed.state()
    state.pop("process_env", None)
    return sha256_text(canonical_json({"lock_digest": lock_digest, "observed": state}))


def run_fingerprint(node_fingerprints: list[str | None], lock_digest: str | None) -> str | None:
    """sha256 over the distinct node fingerprints; None when a node was not observed."""
    if not node_fingerprints or any(fp is None for fp in node_fingerprints):
        return None
    return sha256_text(canonical_json({"lock_digest": lock_digest, "nodes": sorted(set(node_fingerprints))}))


def node_kind(facts: NodeFacts | None, python: str | None = None, torch: str | None = None) -> str | None:
    """A short fingerprint of what makes two nodes build the same extension wheel: machine
    architecture, glibc, CUDA (driver and nvcc), GPU compute capabilities (from a facts.json),
    the environment's torch and python versions. None without facts."""
    if facts is None:
        return None
    data = {"arch": facts.arch, "glibc": facts.glibc, "driver_cuda": facts.driver_cuda,
            "nvcc": facts.nvcc, "torch": torch, "python": python,
            "cc": sorted({g.compute_capability for g in facts.gpus})}
    return sha256_text(canonical_json(data))[:12]
