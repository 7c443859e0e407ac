"""Renderers quote by construction (issue 41): a hostile recipe value that reaches a rendered job
script comes back exactly when the script's own shell reads it, whatever it holds (quotes,
`$(...)`, backticks, globs, semicolons, unicode); nothing in it runs. Hypothesis generates the
values; bash parses the rendered Slurm task."""

from __future__ import annotations

import re
import subprocess

from hypothesis import HealthCheck, given, settings, strategies as st

from envbuild.launch import LaunchOptions, render_launch
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.targets import load_target
from support.ib_inventory import profile_facts

HEREDOC = re.compile(r"<<'(ENVBUILD_EOF_[0-9a-f]+)'\n(.*?)\n\1\n", re.S)
# one line without control bytes (the schema's rule for environment values), and no "{": a brace
# field is a template the launch fills from the plan, not a literal
# ("$ENVBUILD_*" is kept as the expansion of the launch's own variable, and a leading "~" as the
# node user's home, as the published scripts' shells read them: by design, not literal)
VALUES = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="{}"), max_size=40).filter(
    lambda v: "$ENVBUILD_" not in v and not v.startswith("~")) | st.sampled_from(
    ["$(touch pwned)", "`touch pwned`", "'; touch pwned; '", '"; touch pwned; "', "*", "a~b", "a b\tc", "\\"])

RECIPE, TARGET = load_recipe("alpa-megatron-h100"), load_target("h100-venv")
PLAN = resolve(RECIPE, TARGET, profile_facts(TARGET), None, PlanOptions(host="n1")).plan


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES)
def test_a_benchmark_env_value_comes_back_from_the_slurm_task_exactly(value, tmp_path_factory):
    bench = RECIPE.benchmark.model_copy(update={"env": {**RECIPE.benchmark.env, "HOSTILE": value}})
    recipe = RECIPE.model_copy(update={"benchmark": bench})
    text = render_launch(recipe, TARGET, PLAN, LaunchOptions(scheduler="slurm")).text
    task = HEREDOC.findall(text)[-1][1]
    (line,) = [x for x in task.splitlines() if x.startswith("export HOSTILE=")]
    folder = tmp_path_factory.mktemp("rt")
    got = subprocess.run(["bash", "-c", line + '\nprintf %s "$HOSTILE"'], capture_output=True, cwd=folder,
                         timeout=30)
    assert got.returncode == 0 and got.stdout.decode() == value
    assert not any(folder.iterdir())  # nothing the value held ran
