"""A provisioned-looking environment made for real (a venv with exact packages, a git tree with a
recorded patch, a built .so, an env file) with its lock and plan (``make_env``), and the
node-side observe script run on this machine (``observe_local``): for the observe and verify tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envbuild.observe import expected_state, observe_args, observe_command, parse_observed

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid"}
C_SOURCE = "int envbuild_answer(void) { return %d; }\n"


def sh(*cmd, cwd=None, env=None) -> str:
    return subprocess.run(list(map(str, cmd)), cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV, **(env or {})}).stdout


def make_venv(prefix: Path, packages: dict[str, str], python: str = sys.executable) -> None:
    """A real venv at ``prefix`` with exact ``packages`` from PyPI (installed by uv)."""
    sh(sys.executable, "-m", "uv", "venv", "-q", "--python", python, prefix)
    if packages:
        sh(sys.executable, "-m", "uv", "pip", "install", "-q", "--python", prefix / "bin" / "python",
           *[f"{k}=={v}" for k, v in packages.items()])


def build_so(path: Path, answer: int) -> None:
    """Compile a tiny shared library (a real ELF .so) to ``path``."""
    src = path.with_suffix(".c")
    src.write_text(C_SOURCE % answer)
    sh("cc", "-shared", "-fPIC", "-o", path, src)


def make_tree(dest: Path) -> str:
    """A git tree with one commit; returns its SHA."""
    (dest / "megatron").mkdir(parents=True)
    (dest / "megatron" / "training.py").write_text("TIE_EMBEDDINGS = True\n")
    sh("git", "init", "-q", dest)
    sh("git", "add", "-A", cwd=dest)
    sh("git", "commit", "-q", "-m", "pinned", cwd=dest)
    return sh("git", "rev-parse", "HEAD", cwd=dest).strip()


def apply_patch(prefix: Path, tree: Path) -> None:
    """Change the tree and record the diff as envbuild's patch step does."""
    (tree / "megatron" / "training.py").write_text("TIE_EMBEDDINGS = False\n")
    diff = sh("git", "diff", cwd=tree)
    patches = prefix / ".envbuild" / "patches"
    patches.mkdir(parents=True, exist_ok=True)
    (patches / "untie-embeddings.diff").write_text(diff)
    (patches / "untie-embeddings.json").write_text(json.dumps({"component": "megatron", "reason": "as benchmarked"}))


def write_env_file(prefix: Path, variables: dict[str, str]) -> Path:
    path = prefix / ".envbuild" / "env.sh"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# envbuild environment\n" + "".join(f"export {k}='{v}'\n" for k, v in variables.items()))
    return path


def make_plan(prefix: Path, tree: Path, sha: str, env: dict[str, str]) -> dict:
    """The plan as plan.json holds it, built from the typed model (its shapes are checked)."""
    from envbuild.plan import params as P
    from envbuild.plan.model import Plan, Step

    steps = [
        Step(id="git:megatron", title="", params=P.GitSourceParams(
            name="megatron", url="https://example.invalid/megatron", fetch_url=str(tree), ref="main",
            sha=sha, dest=str(tree))),
        Step(id="patch:untie", title="", params=P.PatchParams(
            id="untie-embeddings", component="megatron", dest=str(tree), patch_kind="replace",
            file="megatron/training.py", old="TIE_EMBEDDINGS = True", new="TIE_EMBEDDINGS = False")),
        Step(id="env-file", title="", params=P.EnvFileParams(path=str(prefix / ".envbuild" / "env.sh"), vars=env)),
    ]
    plan = Plan(recipe="r", target="t", host="local", prefix=str(prefix), backend="venv", steps=steps)
    return json.loads(plan.to_json())


def make_env(root: Path, packages: dict[str, str]) -> tuple[dict, dict]:
    """A complete provisioned-looking environment under ``root``: (lock, plan)."""
    prefix = root / "env"
    make_venv(prefix, packages)
    tree = prefix / "src" / "megatron"
    sha = make_tree(tree)
    apply_patch(prefix, tree)
    build_so(tree / "megatron" / "fused_kernels.so", 42)
    env = {"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    write_env_file(prefix, env)
    lock = {"schema": "envbuild.lock/1", "packages": [{"name": k, "version": v} for k, v in packages.items()],
            "git": [{"name": "megatron", "sha": sha, "verified": True}]}
    # the env file as the plan's env_file step writes it (its digest is the step's effect)
    from envbuild.actions.steps import env_file_text

    (prefix / ".envbuild" / "env.sh").write_text(env_file_text(str(prefix), env))
    return lock, make_plan(prefix, tree, sha, env)


def observe_local(plan: dict, python: str | None = None, extra_env: dict | None = None):
    exp = expected_state(None, plan)
    cmd = observe_command(python or exp.python, observe_args(exp))
    p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env={**os.environ, **(extra_env or {})})
    assert p.returncode == 0, p.stderr
    return parse_observed(p.stdout)
