"""Step order said, never guessed (issue 49): a source declares what it comes after (``after:``),
sources otherwise keep the order of ``sources:``; a step that writes the environment is never
moved to a container's start by an image render."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envbuild.errors import InputError
from envbuild.facts.profile import from_target
from envbuild.plan.build import PlanOptions, build_plan
from envbuild.plan.image import build_steps, image_plan
from envbuild.recipes import load_recipe
from envbuild.recipes.order import order
from envbuild.shipped import RECIPES
from envbuild.targets import load_target


def test_default_order_is_the_order_of_sources() -> None:
    assert order(["a", "b", "c"], {}) == ["a", "b", "c"]
    assert order(["a", "b", "c"], {"a": ["c"]}) == ["b", "c", "a"]  # a waits; the others keep theirs
    assert order(["neox", "deeperspeed"], {"neox": ["deeperspeed"]}) == ["deeperspeed", "neox"]
    assert order(["a", "b", "c", "d"], {"a": ["d"], "b": ["a"]}) == ["c", "d", "a", "b"]


@pytest.mark.parametrize("after,message", [
    ({"a": ["zz"]}, "source 'a' comes after 'zz', which is not a source (sources: a, b)"),
    ({"a": ["a"]}, "source 'a' cannot come after itself"),
    ({"a": ["b"], "b": ["a"]}, "sources a, b wait for each other in a circle of 'after:'"),
])
def test_an_after_that_cannot_hold_is_refused(after: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        order(["a", "b"], after)


def _recipe(tmp_path: Path, name: str, edit) -> Path:
    data = yaml.safe_load((RECIPES / "megatronapp-h100.yaml").read_text())
    data.update(name=name, default=False)
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _source(data: dict, name: str) -> dict:
    return next(s for s in data["sources"] if s["name"] == name)


def test_a_source_after_another_runs_all_its_steps_after_it(tmp_path: Path) -> None:
    """megatronapp-h100 lists megatronapp, then apex: its build (which pip installs the tree)
    runs before Apex exists; with ``after: [apex]`` every megatronapp step follows Apex's install."""
    tgt = load_target("h100-venv")
    listed = build_plan(load_recipe("megatronapp-h100"), tgt, from_target(tgt), None, PlanOptions())
    ids = [s.id for s in listed.steps]
    assert ids.index("build:megatronapp") < ids.index("git:apex")  # the order of sources:

    path = _recipe(tmp_path, "after-apex", lambda d: _source(d, "megatronapp").update(after=["apex"]))
    rec = load_recipe(path)
    assert [s.name for s in rec.ordered_sources()] == ["apex", "megatronapp"]
    ids = [s.id for s in build_plan(rec, tgt, from_target(tgt), None, PlanOptions()).steps]
    apex = [i for i, s in enumerate(ids) if s.endswith(":apex")]
    mine = [i for i, s in enumerate(ids) if s.endswith(":megatronapp") or s.startswith("patch:")
            and s != "patch:apex-cuda-check"]
    assert apex and mine and max(apex) < min(mine), ids
    # an unchanged recipe keeps its digest: `after: []` is left out of the dump
    assert "after" not in load_recipe("megatronapp-h100").model_dump(mode="json")["sources"][0]


def test_an_after_naming_no_source_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "after-nothing", lambda d: _source(d, "apex").update(after=["deeperspeed"]))
    with pytest.raises(InputError) as exc:
        load_recipe(path)
    assert str(path) in str(exc.value) and "comes after 'deeperspeed', which is not a source" in str(exc.value)


def test_a_build_that_installs_is_never_moved_to_container_start(tmp_path: Path) -> None:
    """megatronapp-h100's build pip installs its tree after its data files; without a sha256
    for one of them the data waits for the container's start, and the install would have gone
    with it into prepare.sh, run by a user who cannot write the environment: refused, naming the
    command and the fixes."""
    def unchecked(d: dict) -> None:
        d["data"][0].pop("sha256")
        d["data"][0]["unverified"] = "not recorded"

    from envbuild.render import dockerfile

    rec = load_recipe(_recipe(tmp_path, "install-late", unchecked))
    with pytest.raises(InputError) as exc:
        dockerfile.render(image_plan(rec, load_target("h100-venv"), None))
    msg = str(exc.value)
    assert "step build:megatronapp writes the environment ('python -m pip install --no-deps" in msg
    assert "never at a container's start" in msg
    assert "record each file's sha256" in exc.value.hint and "after:" in exc.value.hint
    # with every sha256 recorded the same build is baked into the image
    ip = image_plan(load_recipe("megatronapp-h100"), load_target("h100-venv"), None)
    assert "envbuild/prepare.sh" not in dockerfile.render(ip).files
    assert "build:megatronapp" in [s.id for s in build_steps(ip, run_time_data=True)]
