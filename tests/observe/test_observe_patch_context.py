"""A patch observed on the node is applied while its own lines are there, also when a second
patch a line away changed its diff's context (envbuild.node.observe.patch_still_applied): the
drift check of a provision of megatronapp-h100 on a 4 x H200 node called te-absent-stand-in
"reverted" because packaging-not-pkg-resources had changed the line after it. Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envbuild.node.observe import patch_still_applied


def git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), "-c", "user.email=t@e", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


def test_a_patch_next_to_another_is_still_applied_and_a_reverted_one_is_not(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    git(tree, "init", "-q")
    (tree / "m.py").write_text("".join(f"line{i}\n" for i in range(1, 13)))
    git(tree, "add", "m.py")
    git(tree, "commit", "-qm", "pinned")
    text = (tree / "m.py").read_text()
    (tree / "m.py").write_text(text.replace("line6\n", "try:\n    line6\nexcept ImportError:\n    pass\n"))
    diff = tmp_path / "first.diff"
    diff.write_text(git(tree, "diff"))
    assert patch_still_applied(str(diff), str(tree)) is True
    # the second patch, one line below: the first diff's context no longer matches the tree
    (tree / "m.py").write_text((tree / "m.py").read_text().replace("line7\n", "line7 = 'patched'\n"))
    full = subprocess.run(["git", "-C", str(tree), "apply", "--reverse", "--check", str(diff)], capture_output=True)
    assert full.returncode != 0
    assert patch_still_applied(str(diff), str(tree)) is True
    # the first patch's own lines undone: reverted, whatever the context
    (tree / "m.py").write_text((tree / "m.py").read_text().replace("try:\n    line6\nexcept ImportError:\n    pass\n",
                                                                    "line6\n"))
    assert patch_still_applied(str(diff), str(tree)) is False
