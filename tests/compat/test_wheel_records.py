"""Wheels whose own RECORD is wrong (envbuild.compat.wheel_records): the effect check excuses
exactly the listed files of exactly that wheel (by sha256), and still checks every other."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from envbuild.actions.effects import effects
from envbuild.node.effects import check_record
from envbuild.compat.wheel_records import RECORD_DEFECTS, record_defects
from envbuild.facts.profile import from_target
from envbuild.lock import lock_path, read_lock
from envbuild.plan.build import build_plan
from envbuild.recipes import load_recipe
from envbuild.targets import load_target


def _row(site: Path, rel: str, recorded: bytes | None = None) -> str:
    data = recorded if recorded is not None else (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def test_only_the_listed_file_is_excused(tmp_path: Path):
    """A dist-info as the torch 1.10.1 wheel ships it: METADATA differs from its RECORD row."""
    info = tmp_path / "torch-1.10.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: torch\nVersion: 1.10.1\n")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("x = 1\n")
    rows = [_row(tmp_path, "torch-1.10.1.dist-info/METADATA", b"Name: torch\nVersion: 1.10.1\n\n\n"),
            _row(tmp_path, "torch/__init__.py"), "torch-1.10.1.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    broken, _, _ = check_record(str(tmp_path), info.name)
    assert broken == ["torch-1.10.1.dist-info/METADATA (size 28, recorded 30)"]
    assert check_record(str(tmp_path), info.name, excused=["torch-1.10.1.dist-info/METADATA"])[0] == []
    (tmp_path / "torch" / "__init__.py").write_text("x = 2\n")  # any other file is still checked
    broken, _, _ = check_record(str(tmp_path), info.name, excused=["torch-1.10.1.dist-info/METADATA"])
    assert broken and broken[0].startswith("torch/__init__.py")


def test_the_plan_carries_the_excuse_for_the_locked_wheel_only():
    rec, tgt = load_recipe("opt-175b-azure"), load_target("local")
    lock = read_lock(lock_path(rec.name, tgt.name))
    torch = lock.package("torch")
    plan = build_plan(rec, tgt, from_target(tgt), lock)
    eff = effects(plan)["pip:torch"]
    assert eff.record_defects == {"torch": list(RECORD_DEFECTS[torch.dist.sha256].paths)}
    assert eff.model_dump(mode="json")["record_defects"] == eff.record_defects
    assert record_defects("torch", ["0" * 64]) == []  # another file of the same version: no excuse
    assert effects(plan)["pip:packages"].record_defects == {}
    assert "record_defects" not in effects(plan)["pip:packages"].model_dump(mode="json")
