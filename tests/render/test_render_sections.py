"""A recipe value never re-sections a rendered Apptainer definition (issue 41): environment
values are one line without control bytes (refused where the recipe or target is read, naming
the field), and a line of an inline file that would start a section is refused by the renderer."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from envbuild.errors import InputError
from envbuild.recipes import load_recipe
from envbuild.recipes.schema import Recipe
from envbuild.render import apptainer
from envbuild.targets import load_target
from envbuild.targets.schema import Target


@pytest.mark.parametrize("value", ["x\n%setup\n    touch /tmp/pwned", "a\rb", "bell\x07", "esc\x1b]0;t\x07",
                                   "c1\x9b31m"])
def test_an_env_value_with_a_line_break_or_control_byte_is_refused(value):
    data = load_recipe("cpu-reference").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["env"] = {"HOSTILE": value}
    with pytest.raises(ValidationError) as err:
        Recipe.model_validate(data)
    assert "env.HOSTILE" in str(err.value)
    assert "one line without control characters" in str(err.value)


def test_a_target_env_value_is_held_to_the_same_rule():
    data = load_target("azure-nd96").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["env"] = {**data.get("env", {}), "NCCL_X": "1\n%post\nid"}
    with pytest.raises(ValidationError):
        Target.model_validate(data)


def test_tabs_and_ordinary_values_still_load():
    data = load_recipe("cpu-reference").model_dump(mode="json", by_alias=True, exclude_none=True)
    data["env"] = {"A": "x\ty", "B": "--flag=1 2"}
    assert Recipe.model_validate(data).env == {"A": "x\ty", "B": "--flag=1 2"}


@pytest.mark.parametrize("line", ["%setup", "  %post", "%environment"])
def test_an_inline_line_that_starts_a_section_is_refused(line):
    with pytest.raises(InputError) as err:
        apptainer._body("patch:x", ["ok", line, "tail"])
    assert "step patch:x" in err.value.message and "starts a section" in err.value.message
    assert apptainer._body("p", ["100%", "a % b", "  x"]) == ["100%", "a % b", "  x"]


