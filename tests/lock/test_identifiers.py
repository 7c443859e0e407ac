"""One identifier per object: the lock digest has one definition (``envbuild.lock.lock_digest``)
and every place that prints it prints the same value: the plan, the Dockerfile's label and
comment, the shell render, launch headers, run.json (provision records it), the report (also
for a run whose run.json predates recording it) and verify's fingerprint input."""

from __future__ import annotations

import json
import shutil

from envbuild.inputs import node_facts
from envbuild.launch import LaunchOptions, render_launch
from envbuild.lock import lock_digest, lock_path, read_lock
from envbuild.plan.build import PlanOptions
from envbuild.plan.resolve import resolve
from envbuild.recipes import load_recipe
from envbuild.render.script import render as render_script
from envbuild.report import collect
from envbuild.targets import load_target
from support.paths import DATA

SAMPLE = DATA / "runs" / "20261122-073000-alpa-megatron-h100-ubuntu2404"


def test_the_lock_digest_is_the_same_wherever_it_is_printed(tmp_path):
    rec, tgt = load_recipe("cpu-reference"), load_target("local")
    lock = read_lock(lock_path("cpu-reference", "local"))
    digest = lock_digest(lock)
    plan = resolve(rec, tgt, node_facts(tgt)[0], lock, PlanOptions(prefix="/opt/envs/ref")).plan
    assert plan.lock_digest == digest
    assert f"lock digest {digest}" in render_script(plan).files["run.sh"]
    header = render_launch(rec, tgt, plan, LaunchOptions(scheduler="local")).text.split("\nset ")[0]
    assert f"lock digest {digest}" in " ".join(line.lstrip("# ") for line in header.splitlines())
    # a run directory whose run.json does not record it: the report computes the same value
    run = tmp_path / "runs" / SAMPLE.name
    shutil.copytree(SAMPLE, run)
    data = json.loads((run / "run.json").read_text())
    data.pop("lock_digest")
    (run / "run.json").write_text(json.dumps(data))
    shutil.copy(lock_path("cpu-reference", "local"), run / "lock.lock")
    assert collect(run).recipe.lock_digest == digest
