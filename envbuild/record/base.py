"""The base of every run-folder model: a field the model does not declare is refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


# a number as written: an int stays an int (a threshold of 200000, a FLOP count), a float a float
Number = int | float


class Record(BaseModel):
    """A run-folder document or a part of one (unknown fields refused)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", populate_by_name=True)

    def as_written(self) -> dict[str, Any]:
        """The document as data: the fields it was given or set, nothing filled in (floats as
        floats: a non-finite loss stays NaN, as ``json.dumps`` writes it)."""
        return self.model_dump(by_alias=True, exclude_unset=True)
