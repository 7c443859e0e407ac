"""The known-fix rows of ``envbuild port`` (envbuild/port/data/fixes.yaml) on their own examples:
each row turns its ``before`` into its ``after`` through the patch port would write (scan's
``_patches_of`` then envbuild's text patcher), a second run finds it applied, and a text
without the pattern (or without the row's ``requires``) gets no patch. A ported variant's
deviation for a row names its test here (``test_fix_row_example[<id>]``)."""

from __future__ import annotations

import pytest

from envbuild.patches import apply_text_patch
from envbuild.port.scan import _patches_of
from envbuild.port.tables import fixes

ROWS = list(fixes())


def _apply(text: str, row, cc: str = "9.0") -> str:
    for kind, old, new, count, _line in _patches_of(text, row, cc):
        status, text2 = apply_text_patch(text, kind, old, new, count)
        assert status == "applied", (row.id, status)
        assert apply_text_patch(text2, kind, old, new, count)[0] == "already-applied", row.id
        text = text2
    return text


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fix_row_example(row) -> None:
    before, after = row.example.before, row.example.after
    assert row.grep in before, f"{row.id}: git grep looks for {row.grep!r}, which its example lacks"
    assert _patches_of(before, row, "9.0"), f"{row.id}: its pattern finds nothing in its example"
    assert _apply(before, row) == after
    assert _patches_of(after, row, "9.0") == [], f"{row.id}: the pattern still matches what it made"


def test_a_text_without_the_pattern_gets_no_patch() -> None:
    by_id = {r.id: r for r in ROWS}
    assert _patches_of("x = np.float32(1)\nnp.float_\n", by_id["numpy-float-alias"], "9.0") == []
    guarded = "try:\n    from torch._six import inf as inf\nexcept ImportError:\n    from torch import inf\n"
    assert _patches_of(guarded, by_id["torch-six-inf"], "9.0") == []
    assert _patches_of("from collections import OrderedDict, Mapping\n", by_id["collections-abc-import"], "9.0") == []
    # requires: the Python reference must be in the file for the helper call to go
    assert _patches_of("idx = helpers.build_sample_idx(a)\n", by_id["sample-idx-python"], "9.0") == []


def test_arch_rows_build_for_the_nodes_arch() -> None:
    row = next(r for r in ROWS if r.id == "gencode-sm70")
    assert "arch=compute_100,code=sm_100" in _apply("'-gencode', 'arch=compute_70,code=sm_70',\n", row, "10.0")


def test_distinct_matches_become_one_literal_patch_each() -> None:
    row = next(r for r in ROWS if r.id == "dataclass-default-factory")
    text = ("@dataclass\nclass C:\n    common: CommonConfig = CommonConfig()\n"
            "    dataset: DatasetConfig = DatasetConfig()\n")
    patches = _patches_of(text, row, "9.0")
    assert [(k, old.strip()) for k, old, *_ in patches] == [
        ("replace", "common: CommonConfig = CommonConfig()"), ("replace", "dataset: DatasetConfig = DatasetConfig()")]
    assert "field(default_factory=DatasetConfig)" in _apply(text, row)
