"""The labels an image must carry to be signed as built from a rendered context
(envbuild.bundle.imageprov), read value for value from the context's Dockerfile; the engine run
for real: tests/bundle/test_image_provenance.py."""

from __future__ import annotations


import pytest

from envbuild.bundle.imageprov import LABELS, Image, check_built_from, dockerfile_labels
from envbuild.errors import CheckFailed
from support.paths import ROOT

DOCKERFILE = ROOT / "containers" / "cpu-reference" / "local" / "dockerfile" / "Dockerfile"


def test_an_image_with_the_contexts_labels_passes_and_one_spanning_two_of_them_does_not():
    text = DOCKERFILE.read_text()
    labels = {k: v for k, v in dockerfile_labels(text).items() if k in LABELS}
    assert sorted(labels) == sorted(LABELS) and labels["io.envbuild.recipe"] == "cpu-reference"
    check_built_from(Image("img", "a" * 64, labels), text, "ctx")
    # a recipe label whose value is the Dockerfile's text from that value to the next label's:
    # a substring test would find it there; the label's value is not the Dockerfile's
    start = text.index('io.envbuild.recipe="') + len('io.envbuild.recipe="')
    spanning = text[start:text.index('"', text.index('io.envbuild.target="') + len('io.envbuild.target="'))]
    assert f'io.envbuild.recipe="{spanning}"' in text
    with pytest.raises(CheckFailed, match="was not built from ctx: its io.envbuild.recipe"):
        check_built_from(Image("img", "a" * 64, {**labels, "io.envbuild.recipe": spanning}), text, "ctx")
