"""A locked package older than the one the node's Python already has is said, never silent
(issue 49: the lock took typing-extensions below the node's own): the plan of an environment
that sees the node's packages carries a ``downgrade:NAME`` decision naming both versions."""

from __future__ import annotations

import json
from pathlib import Path

from support.clirun import envbuild

from envbuild.facts.profile import from_target
from envbuild.targets import load_target


def _facts(tmp_path: Path, packages: dict[str, str]) -> Path:
    facts = from_target(load_target("h100-venv")).model_copy(
        update={"host": "node1", "origin": "collected", "pip_packages": packages})
    path = tmp_path / "facts.json"
    path.write_text(facts.to_json())
    return path


def test_a_locked_package_older_than_the_nodes_is_named_with_both_versions(tmp_path: Path) -> None:
    # h100-megatron-deepspeed's venv sees /opt/torch/.venv; its lock pins pydantic 2.13.3, hjson 3.1.0
    facts = _facts(tmp_path, {"Pydantic": "2.14.0", "hjson": "3.1.0", "deepspeed": "0.18.0"})
    p = envbuild("plan", "h100-megatron-deepspeed", "--target", "h100-venv", "--facts", facts, "--json")
    assert p.returncode == 0, p.stderr
    said = {d["subject"]: d for d in json.loads(p.stdout)["decisions"] if d["subject"].startswith("downgrade:")}
    assert list(said) == ["downgrade:pydantic"]  # hjson equal, deepspeed newer: nothing to say
    assert said["downgrade:pydantic"]["outcome"] == "2.14.0 -> 2.13.3"
    assert said["downgrade:pydantic"]["reason"].startswith("warning: node1's Python has pydantic 2.14.0; "
                                                           "the environment installs the locked 2.13.3")


def test_an_environment_that_does_not_see_the_nodes_packages_says_nothing(tmp_path: Path) -> None:
    facts = _facts(tmp_path, {"numpy": "99.0"})  # cpu-reference installs numpy 2.4.6 into its own venv
    plan = json.loads(envbuild("plan", "cpu-reference", "--target", "h100-venv", "--facts", facts, "--json").stdout)
    env = next(s for s in plan["steps"] if s["id"] == "environment")
    installs = [r["name"] for s in plan["steps"] if s["id"] == "pip:packages" for r in s["params"]["requirements"]]
    assert not env["params"]["system_site_packages"] and "numpy" in installs
    assert not any(d["subject"].startswith("downgrade:") for d in plan["decisions"])
