"""Which repositories envbuild installs with a builder of its own (``data/builders.yaml``): a
git source drafted from one gets that ``install`` and its pip command's ``--global-option``
values as ``build_options``. Rows a site adds (``envbuild.knowledge``) come after the shipped
ones; a URL already given is refused, naming both files."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envbuild import knowledge
from envbuild.shipped import PACKAGE

DATA = PACKAGE / "draft" / "data"
NAME = "builders.yaml"


class Builder(BaseModel):
    """A repository (``url``, however a README writes it: case, ``.git`` and a trailing slash do
    not count) installed by envbuild's ``install`` path, with ``why`` and its ``source``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(pattern=r"^https://\S+$")
    install: str = Field(pattern=r"^(apex)$")  # the builders envbuild has (recipes.schema's install: apex)
    why: str = Field(min_length=1)
    source: str = Field(min_length=1)

    @field_validator("url")
    @classmethod
    def _bare(cls, value: str) -> str:
        return same_repo(value)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_: int = Field(1, alias="schema")
    builders: list[Builder] = Field(default_factory=list)


def same_repo(url: str) -> str:
    """A repository's URL as the table keys it.

    >>> same_repo("https://github.com/NVIDIA/apex.git/"), same_repo("https://GitHub.com/nvidia/Apex")
    ('https://github.com/nvidia/apex', 'https://github.com/nvidia/apex')
    >>> same_repo("ssh://git@github.com/NVIDIA/apex.git"), same_repo("git://www.github.com/NVIDIA/apex")
    ('https://github.com/nvidia/apex', 'https://github.com/nvidia/apex')
    >>> same_repo("git@github.com:NVIDIA/apex.git"), same_repo("https://github.com:443/NVIDIA/apex")
    ('https://github.com/nvidia/apex', 'https://github.com:443/nvidia/apex')
    """
    bare = re.sub(r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]+@)?(?:www\.)?", "", url.strip().lower())
    bare = re.sub(r"^([^/:]+):(?!\d)", r"\1/", bare)  # scp's form, git@github.com:NVIDIA/apex
    return "https://" + bare.rstrip("/").removesuffix(".git")


@functools.lru_cache(maxsize=8)
def _builders(where: tuple[tuple[Path, int | None], ...]) -> tuple[Builder, ...]:
    return knowledge.merged(NAME, _Table, "builders", "url", where, DATA)


def builders() -> tuple[Builder, ...]:
    """The shipped rows, then the knowledge folders' (``envbuild.knowledge``)."""
    return _builders(knowledge.stamped((DATA, *knowledge.folders()), NAME))


def builder_of(url: str) -> Builder | None:
    """The row of the repository ``url`` names, if envbuild builds it itself.

    >>> builder_of("https://github.com/NVIDIA/apex.git").install, builder_of("https://github.com/NVIDIA/apex-fork")
    ('apex', None)
    """
    key = same_repo(url)
    return next((b for b in builders() if b.url == key), None)
