"""Apex build options as a table of rows: when each option appeared on master, when it was
removed, and where that is from (PINS.md "Build options by date"; dates are commit dates on
NVIDIA/apex master). ``validate_options`` checks a recipe's options against an Apex commit date.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from envbuild.errors import CheckFailed, InputError

APEX = "https://github.com/NVIDIA/apex/commit/"


@dataclass(frozen=True)
class OptionRow:
    """Apex setup.py option ``flag``: present on master from ``added`` until ``removed``."""

    flag: str
    added: str  # YYYY-MM-DD
    added_in: str  # commit
    removed: str | None = None
    removed_in: str | None = None
    takes_value: bool = False  # --parallel N
    note: str = ""
    # git submodules the option's build reads: (path, URL in .gitmodules); the plan fetches
    # them with the checkout (from the git mirror when there) instead of setup.py at build time
    submodules: tuple[tuple[str, str], ...] = ()

    @property
    def env_var(self) -> str:
        """The env-var spelling accepted from 2025-07-22 (bfb500c8): --cuda_ext -> APEX_CUDA_EXT."""
        if self.flag == "--parallel":
            return "APEX_PARALLEL_BUILD"
        return "APEX_" + self.flag.lstrip("-").upper()

OPTIONS: list[OptionRow] = [
    OptionRow("--cuda_ext", "2018-10-23", "81eef1ef"),
    OptionRow("--cpp_ext", "2018-10-29", "e0bc5d62"),
    OptionRow("--bnp", "2019-04-26", "fedfe0d7"),
    OptionRow("--xentropy", "2019-05-10", "0c74571f", note="#295"),
    OptionRow("--pyprof", "2019-08-13", "880ab925", "2022-07-06", "8a7a3325"),
    OptionRow("--deprecated_fused_adam", "2019-10-04", "1904e48d",
              note="#517; builds fused_adam_cuda, which metaseq imports first"),
    OptionRow("--fast_multihead_attn", "2020-02-06", "3f94528e", "2026-07-08", "526871a2",
              note="#697; its build runs git submodule update (needs a git checkout and network); "
                   "removed by #2016",
              # e2083df5 setup.py line 350 and .gitmodules (gitlink ed2ed4d6, branch v1.2.0)
              submodules=(("apex/contrib/csrc/multihead_attn/cutlass", "https://github.com/NVIDIA/cutlass.git"),)),
    OptionRow("--deprecated_fused_lamb", "2020-03-19", "b222ed2b"),
    OptionRow("--distributed_lamb", "2020-05-30", "45388d48"),
    OptionRow("--distributed_adam", "2020-12-01", "6b7e77b0"),
    OptionRow("--fast_layer_norm", "2021-02-23", "e2083df5"),
    OptionRow("--transducer", "2021-03-23", "d86d1b09"),
    OptionRow("--fmha", "2021-04-16", "5c9b21d8", "2026-07-08", "526871a2"),
    OptionRow("--fast_bottleneck", "2021-04-17", "705cba91"),
    OptionRow("--permutation_search", "2022-02-02", "89edb819"),
    OptionRow("--peer_memory", "2022-03-22", "40a0e025"),
    OptionRow("--focal_loss", "2022-03-24", "28f8539c"),
    OptionRow("--nccl_p2p", "2022-03-24", "3ade5b26"),
    OptionRow("--fused_conv_bias_relu", "2022-03-30", "23cfb576"),
    OptionRow("--index_mul_2d", "2022-08-02", "a4f42586"),
    OptionRow("--cudnn_gbn", "2022-09-08", "7a12ee65"),
    OptionRow("--group_norm", "2023-07-25", "50ac8425"),
    OptionRow("--gpu_direct_storage", "2024-02-07", "5b67cd5f", "2026-07-08", "6424da3b"),
    OptionRow("--nccl_allocator", "2024-04-24", "6038fc1a"),
    OptionRow("--parallel", "2025-02-25", "c9e6f056", takes_value=True, note="#1882"),
]

# Eras of how options reach setup.py (PINS.md "Flag passing").
PYPROJECT_SINCE = date(2023, 6, 12)  # 2d8302a6, #1669: pyproject.toml -> --no-build-isolation
ENV_FLAGS_SINCE = date(2025, 7, 22)  # bfb500c8, #1910: APEX_CPP_EXT=1 ... env vars


def option_row(flag: str) -> OptionRow | None:
    return next((r for r in OPTIONS if r.flag == flag), None)


def submodules_for(options: list[str]) -> list[tuple[str, str]]:
    """``[(path, url)]`` of the git submodules the build ``options`` need (unknown flags: none)."""
    out: list[tuple[str, str]] = []
    for opt in options:
        row = option_row(opt.partition("=")[0])
        for sub in (row.submodules if row else ()):
            if sub not in out:
                out.append(sub)
    return out


def parse_date(value: str | date | None) -> date | None:
    """``"2021-02-23"`` (or a date) -> date; None stays None; else InputError."""
    if value is None or isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        raise InputError(f"{value!r} is not a date", hint="give the Apex commit date as YYYY-MM-DD") from None


def split_options(options: list[str]) -> list[tuple[OptionRow, str | None]]:
    """Pair each option with its value (``--parallel 8`` or ``--parallel=8``); unknown -> InputError."""
    out: list[tuple[OptionRow, str | None]] = []
    i = 0
    while i < len(options):
        flag, _, value = options[i].partition("=")
        row = option_row(flag)
        if row is None:
            known = ", ".join(r.flag for r in OPTIONS)
            raise InputError(f"unknown Apex build option {flag!r}", hint=f"known options: {known}")
        if row.takes_value and not value:
            if i + 1 >= len(options) or not options[i + 1].isdigit():
                raise InputError(f"{flag} needs a number", hint=f"write '{flag} 8'")
            value = options[i + 1]
            i += 1
        elif value and not row.takes_value:
            raise InputError(f"{flag} takes no value, got {value!r}", hint=f"write '{flag}' alone")
        out.append((row, value or None))
        i += 1
    return out


def validate_options(options: list[str], apex_date: str | date | None) -> list[tuple[OptionRow, str | None]]:
    """Check that every option exists at the Apex commit of ``apex_date``; CheckFailed lists all misses."""
    pairs = split_options(options)
    day = parse_date(apex_date)
    if day is None:
        return pairs
    problems, fixes = [], []
    for row, _ in pairs:
        if day < date.fromisoformat(row.added):
            problems.append(f"{row.flag} appeared on {row.added} ({row.added_in}), after this Apex ({day})")
            fixes.append(f"drop {row.flag} or pin an Apex commit from {row.added} or later")
        elif row.removed and day >= date.fromisoformat(row.removed):
            problems.append(f"{row.flag} was removed on {row.removed} ({row.removed_in}), before this Apex ({day})")
            fixes.append(f"drop {row.flag} or pin an Apex commit before {row.removed}")
    if problems:
        raise CheckFailed("Apex option(s) unknown to this commit: " + "; ".join(problems),
                          hint="; ".join(fixes))
    return pairs
