"""Known commits of the source components the rules reason about (dates decide behaviour).

Apex has no per-torch branches (maintainer, NVIDIA/apex#1868), so what an Apex pin supports
follows from its commit date; these rows come from the mirrors read for PINS.md.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envbuild import knowledge
from envbuild.errors import InputError
from envbuild.patches.apex_options import PYPROJECT_SINCE, option_row
from envbuild.recipes.schema import GitSource
from envbuild.yamlsrc import load_yaml, validate


@dataclass(frozen=True)
class KnownCommit:
    sha: str
    date: str  # YYYY-MM-DD
    note: str


APEX_COMMITS: list[KnownCommit] = [
    KnownCommit("e2083df5eb96643c61613b9df48dd4eea6b07690", "2021-02-23", "fast layer norm (#1037); metaseq a1a4e733 pin"),
    KnownCommit("a651e2c24ecf97cbf367fd3f330df36760e1c597", "2021-03-24", "GPT-NeoX v1.0 Dockerfile:99 pin (committer date)"),
    KnownCommit("9263bc8c", "2022-04-01", "22.04-dev branch head (date approximate: branch name)"),
    KnownCommit("265b451de8ba9bfcb67edc7360f3d8772d0a8bea", "2022-05-31", "#1391; metaseq docs from 2022-10"),
    KnownCommit("52e18c894223800cb611682dce27d88050edf1de", "2023-09-06", "#1721; ALCF conda/2023-10-04"),
    KnownCommit("2863aa02", "2024-12-01", "torch.library.custom_op probing (NVIDIA/apex#1868), date approximate"),
    KnownCommit("73375b3b", "2024-12-01", "torch.library.custom_op probing (NVIDIA/apex#1868), date approximate"),
    KnownCommit("6424da3b4faa6c8f062da4a48c424fff3f02d42d", "2026-07-08", "master snapshot head"),
]
APEX_MASTER = APEX_COMMITS[-1]


class _Commit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sha: str
    date: str
    note: str = Field(min_length=1)
    source: str = Field(min_length=1)  # where the commit and its date were read

    @field_validator("sha")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{40}", v):
            raise ValueError(f"a full 40-hex commit, got {v!r}")
        return v

    @field_validator("date")
    @classmethod
    def _date(cls, v: str) -> str:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            raise ValueError(f"YYYY-MM-DD, got {v!r}")
        return v


class _CommitTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_: int = Field(alias="schema")
    commits: list[_Commit]


@functools.lru_cache(maxsize=8)
def _apex_commits(where: tuple[tuple[Path, int | None], ...]) -> tuple[KnownCommit, ...]:
    rows = list(APEX_COMMITS)
    for folder, stamp in where:
        path = folder / "apex_commits.yaml"
        if stamp is None:
            continue
        data, loc = load_yaml(path)
        for c in validate(_CommitTable, data, path, loc).commits:
            if any(_match(c.sha, k.sha) for k in rows):
                raise InputError(f"{path}: Apex commit {c.sha[:12]} is already known (envbuild/compat/commits.py "
                                 "or an earlier knowledge folder)", hint="a site's rows add commits, never replace them")
            rows.append(KnownCommit(c.sha, c.date, f"{c.note} ({path}; {c.source})"))
    return tuple(rows)


def apex_commits() -> tuple[KnownCommit, ...]:
    """The known Apex commits: the shipped rows, then those of the knowledge folders
    (``apex_commits.yaml``: ``{schema: 1, commits: [{sha, date, note, source}]}``)."""
    return _apex_commits(knowledge.stamped(knowledge.folders(), "apex_commits.yaml"))

# Apex milestones (first commit on master with the behaviour).
APEX_PYPROJECT = PYPROJECT_SINCE.isoformat()  # 2d8302a6 (#1669): pyproject.toml, --config-settings
APEX_TORCH_LIBRARY = "2024-12-01"  # 2863aa02/73375b3b: needs torch.library.custom_op
APEX_FAST_MHA_REMOVED = option_row("--fast_multihead_attn").removed  # 526871a2 (#2016)
APEX_TORCH_SIX_LAST = "2022-05-31"  # 265b451d still imports torch._six (static check)
APEX_OLD_TORCH_DROPPED = "2023-01-01"  # "latest APEX does not support torch v1.7.1" (Jan 2023)
APEX_SM70_FLAGS_SINCE = "2022-02-25"  # ddc08039 (#1297): fused_weight_gradient_mlp_cuda, -gencode compute_70
APEX_NO_SM70_FLAGS = "2025-08-21"  # 26bba57d (#1918): per-extension -gencode flags (compute_70) gone

# NVIDIA Megatron-LM b31e129 and the Alpa branch on top of it: no setup.py, fused kernels
# JIT-built with explicit gencode sm_70 (+ sm_80 when nvcc major >= 11), no PTX.
MEGATRON_B31E129 = "b31e1296354e979722627a6c4dedafe19b51fa97"
MEGATRON_B31E129_FAMILY = {
    MEGATRON_B31E129,
    "55fd45c372d4bf988890cbf557fccb817ea3d1dc",
    "d71f76292608e6172c6910143986c4abd2eebae6",
    "c28bbd208d16ffea61fa3c545e66b3a9d87f9d84",
}

# metaseq: a1a4e733 needs Megatron fairseq_v2; >= 5ca60055 needs fairseq_v3.
METASEQ_A1A4E733 = "a1a4e733d27898056fe08fb8f6a1fa6af06ca55a"
METASEQ_V3_SWITCH = "5ca6005552b7a049f071754393d5b86185e0db6a"
MEGATRON_FAIRSEQ_V3 = "fa6c0860b62e4ed2ac13a513e7d950d72f576a44"


def _match(sha: str | None, known: str) -> bool:
    return bool(sha) and (sha.startswith(known) or known.startswith(sha))


def apex_commit(src: GitSource) -> tuple[KnownCommit | None, str]:
    """The known Apex commit a source is pinned to, and how it was identified.

    An unpinned (``unverified``) ``master`` is taken to be as new as the master snapshot.
    """
    if src.sha:
        row = next((c for c in apex_commits() if _match(src.sha, c.sha)), None)
        return row, (f"apex {src.sha[:8]} ({row.date})" if row else f"apex {src.sha[:8]} (date unknown)")
    if src.ref in ("master", "main", "HEAD"):
        return APEX_MASTER, f"apex {src.ref} (unpinned; assumed >= snapshot {APEX_MASTER.date})"
    return None, f"apex {src.ref} (unpinned, date unknown)"


def is_b31e129_megatron(src: GitSource) -> bool:
    """Whether a source is Megatron-LM at b31e129 or the Alpa branch on top of it."""
    if src.sha and any(_match(src.sha, s) for s in MEGATRON_B31E129_FAMILY):
        return True
    return MEGATRON_B31E129 in src.requires_ancestors


def is_metaseq(src: GitSource) -> bool:
    return "metaseq" in src.name.lower() or "metaseq" in src.url.lower()


def is_fairscale(src: GitSource) -> bool:
    return "fairscale" in src.name.lower() or "fairscale" in src.url.lower()


def is_fairseq_v3(src: GitSource) -> bool:
    return src.ref == "fairseq_v3" or _match(src.sha, MEGATRON_FAIRSEQ_V3)


def is_fairseq_v2(src: GitSource) -> bool:
    return src.ref == "fairseq_v2"
