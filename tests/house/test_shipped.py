"""The one locator of shipped files (envbuild/shipped.py) and the wheel's layout (setup.py).

The checkout keeps the design card's top level, ``playbooks/`` and ``lockfiles/`` beside
``envbuild/``; the build backend maps them into the wheel as ``envbuild/playbooks`` and
``envbuild/lockfiles``. One rule (``shipped.top_of``) finds them in either: inside the package
when it holds them, else beside it. Here: the checkout, the rule on both layouts, that setup.py
and pyproject's package-data ship exactly the folders and files the locator names, and that
nothing shipped imports the test bed, which the wheel leaves out (tests/house/test_wheel_install.py
builds and installs the wheel itself).
"""

from __future__ import annotations

import ast
import glob
import tomllib
from pathlib import Path

from envbuild import shipped
from envbuild.shipped import CHECKOUT, INSTALLED, LOCKFILES, PACKAGE, PLAYBOOKS, TOP, top_of
from support.paths import ROOT



def setup_mapping() -> dict[str, str]:
    """setup.py's ``MAPPED`` (package -> folder), read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    (value,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                and [getattr(t, "id", None) for t in n.targets] == ["MAPPED"]]
    return ast.literal_eval(value)


def test_a_checkout_finds_its_top_level_folders():
    assert CHECKOUT == ROOT and PACKAGE == ROOT / "envbuild"
    assert not INSTALLED and TOP == ROOT
    assert PLAYBOOKS == ROOT / "playbooks" and LOCKFILES == ROOT / "lockfiles"
    assert (PLAYBOOKS / "provision.yml").is_file() and (PLAYBOOKS / "ansible.cfg").is_file()
    assert (PLAYBOOKS / "ansible_collections" / "envbuild" / "node" / "galaxy.yml").is_file()
    assert (LOCKFILES / "cpu-reference" / "local.lock").is_file()
    # nothing of them is left inside the package, where an installed wheel keeps them
    assert not (PACKAGE / "playbooks").exists() and not (PACKAGE / "lockfiles").exists()


def test_one_rule_for_a_wheel_and_a_checkout(tmp_path):
    wheel = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "envbuild"
    (wheel / "playbooks").mkdir(parents=True)
    (wheel / "lockfiles").mkdir()
    assert top_of(wheel) == wheel  # installed: the package holds them
    checkout = tmp_path / "src"
    (checkout / "envbuild").mkdir(parents=True)
    (checkout / "playbooks").mkdir()
    assert top_of(checkout / "envbuild") == checkout  # a checkout: beside the package
    assert top_of(PACKAGE) == TOP and shipped.PLAYBOOKS == TOP / "playbooks"


def test_the_build_maps_the_folders_the_locator_names():
    assert setup_mapping() == {f"envbuild.{folder.name}": folder.name for folder in (PLAYBOOKS, LOCKFILES)}


def test_package_data_names_every_shipped_file_of_the_mapped_folders():
    """Each file of playbooks/ and lockfiles/ that provisioning reads is matched by the
    package-data patterns of its mapped package (setuptools globs them recursively); the
    module_utils links count as files (the wheel holds their targets' bytes); what
    exclude-package-data leaves out (bytecode: Ansible imports the action plugins) is not shipped."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    data, excluded = setuptools["package-data"], setuptools["exclude-package-data"]["*"]
    assert excluded == ["*.pyc", "__pycache__/*"]
    for package, folder in setup_mapping().items():
        root = ROOT / folder
        matched = {Path(p) for pattern in data[package]
                   for p in glob.glob(str(root / pattern), recursive=True)
                   if Path(p).is_file() and not p.endswith(".pyc") and "__pycache__" not in Path(p).parts}
        wanted = {p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not p.name.startswith(".")}
        assert wanted and wanted == matched, sorted(str(p) for p in wanted ^ matched)
    links = [p for p in (PLAYBOOKS / "ansible_collections").rglob("*") if p.is_symlink()]
    assert links and all(p.resolve().is_relative_to(PACKAGE / "node") and p.resolve().is_file() for p in links)


def test_the_test_bed_is_left_out_and_nothing_shipped_imports_it():
    tree = ast.parse((ROOT / "setup.py").read_text())
    (value,) = [n.value for n in tree.body if isinstance(n, ast.Assign)
                and [getattr(t, "id", None) for t in n.targets] == ["NOT_SHIPPED"]]
    assert ast.literal_eval(value) == ["envbuild.testbed", "envbuild.testbed.*"]
    testbed = PACKAGE / "testbed"
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(testbed):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            importers += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n == "envbuild.testbed" or n.startswith("envbuild.testbed.")]
    assert importers == []  # the installed wheel would fail on them
