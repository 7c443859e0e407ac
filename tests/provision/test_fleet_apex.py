"""An extension wheel built once per node kind in a fleet: the Apex stand-in
(tests/data/apex_standin, see tests/provision/test_provision_apex.py) onto two loopback sshd nodes of the
same kind (same cache key): the node ``wheel_builders`` elects builds it, the other installs the
controller's copy and builds nothing, and both import apex_C."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envbuild.plan.model import Plan
from envbuild.testbed import uvcache
from test_provision_apex import IMPORT_APEX, WHEELS, env_python, mirror, recipe_yaml  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_extension_built_on_one_node_per_kind(mirror, tmp_path, remove_tree):  # noqa: F811
    recipe = tmp_path / "apex-standin.yaml"
    recipe.write_text(recipe_yaml(mirror["sha"], options=["--cpp_ext"]))
    home, envs = tmp_path / "home", tmp_path / "envs"
    with uvcache.loopback_fleet(tmp_path, 2, 60, remove_tree) as bed:
        argv = [sys.executable, "-m", "envbuild", "provision", "--target", "local", "--recipe", str(recipe),
                "--inventory", str(bed.inventory_path), "--git-mirror", str(mirror["dir"]),
                "--wheelhouse", str(WHEELS), "--prefix", f"{envs}/{{node}}", "--no-smoke", "--json",
                # the nodes read the wheelhouse where it is (they share this machine's disk): the
                # builder is elected from the plans either way, and pushing a fleet's wheels is
                # test_fleet_faults.py's and test_fleet_tree.py's (a 222 MB archive)
                "--no-push-wheels"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=1500,
                           env={**os.environ, **bed.env, "ENVBUILD_HOME": str(home),
                                "ENVBUILD_CACHE_DIR": str(tmp_path / "cache")})
        out = json.loads(p.stdout.splitlines()[-1])
        # --no-smoke: every node ok, nothing judged (NOT JUDGED, exit 5)
        assert p.returncode == 5, json.dumps(out["results"], indent=1)[-3000:] + p.stderr[-2000:]
        run = Path(out["run_dir"])
        plans = {h: Plan.model_validate_json((run / "nodes" / h / "plan.json").read_text()) for h in ("node1", "node2")}
        keys = {h: plan.apex_builds()[0].params.cache_key for h, plan in plans.items()}
        assert keys["node1"] == keys["node2"]  # one node kind
        builds = {h: (run / "nodes" / h / "log.txt").read_text().count("running bdist_wheel") for h in keys}
        assert builds == {"node1": 1, "node2": 0}
        extravars = (run / "ansible" / "env" / "extravars").read_text()
        assert keys["node1"] in extravars and "node1" in extravars  # the elected builder
        for h in keys:
            assert "apex:apex" in out["results"][h]["changed"]
            assert "[0, 2, 5] True" in env_python(envs / h, IMPORT_APEX)
    report = subprocess.run([sys.executable, "-m", "envbuild", "report", str(run), "--format", "md"],
                            capture_output=True, text=True, env={**os.environ, "ENVBUILD_HOME": str(home)}).stdout
    kinds = {line.split("|")[1].strip(): line.split("|")[5].strip()
             for line in report.split("## Fleet", 1)[1].split("\n## ", 1)[0].splitlines() if line.startswith("| node")}
    assert kinds["node1"] == kinds["node2"] != "-"
