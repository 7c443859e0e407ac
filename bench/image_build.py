"""Image build of cpu-reference: cold, then after one locked package changes; image size.

    python bench/image_build.py [--out bench/results/image-build.json] [--package tqdm --to 4.67.1]

1. Fresh podman storage (and TMPDIR, where buildah keeps RUN cache mounts) under a temp dir,
   the chroot testbed's cached bookworm rootfs imported as the base (timed apart).
2. ``envbuild render cpu-reference --target local --format dockerfile --base BASE
   --wheelhouse /opt/wheels``; cold ``podman build --isolation chroot`` (torch from the
   context's wheelhouse/, the other locked packages from PyPI).
3. One package's pin changed in a copy of the recipe, then ``envbuild lock`` of that copy
   over a copy of the shipped lock (a re-lock keeps every other pin: uv's semantics), which
   says which pins moved; the copy rendered with its new lock into a second context; rebuild.
4. Which instructions came from the cache in the rebuild, both build times, the rebuild's
   share of the cold build (goal <= 25 %), image and base sizes; ``verify.sh`` in the rebuilt
   image must pass (the new version is what the image holds).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envbuild.testbed.podman import Podman  # noqa: E402

BASE = "localhost/envbuild-base:bookworm"
PREFIX = "/opt/envbuild/cpu-reference"


def relock(work: Path, name: str, new: str, wheelhouse: str) -> tuple[str, list[dict], Path, Path]:
    """cpu-reference's recipe copied with ``name`` pinned to ``new``, locked with ``envbuild
    lock`` over a copy of the shipped lock: (old version, the pins that moved, recipe, lock)."""
    import yaml

    recipe = work / "recipe" / "cpu-reference.yaml"
    recipe.parent.mkdir(parents=True)
    data = yaml.safe_load((ROOT / "envbuild/recipes/data/cpu-reference.yaml").read_text())
    pkg = next(p for p in data["packages"] if p["name"] == name)
    old = str(pkg["version"]).lstrip("=")
    pkg["version"] = new
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    lock = work / "locks" / "cpu-reference" / "local.lock"
    lock.parent.mkdir(parents=True)
    shutil.copy(ROOT / "lockfiles/cpu-reference/local.lock", lock)
    r = subprocess.run([sys.executable, "-m", "envbuild", "lock", str(recipe), "--target", "local",
                        "--wheelhouse", wheelhouse, "-o", str(lock), "--json"], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stdout + r.stderr)
    return old, json.loads(r.stdout)["results"][0]["moved"], recipe, lock


def steps_of(log: str) -> list[dict]:
    """Each build instruction with whether it came from the cache."""
    out, cur = [], None
    for line in log.splitlines():
        m = re.match(r"STEP (\d+)/(\d+): (\S+)(.*)", line)
        if m:
            cur = {"step": int(m.group(1)), "instruction": m.group(3), "text": (m.group(3) + m.group(4))[:90],
                   "cached": False}
            out.append(cur)
        elif cur is not None and line.startswith("--> Using cache"):
            cur["cached"] = True
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench/results/image-build.json"))
    ap.add_argument("--package", default="tqdm")
    ap.add_argument("--to", default="4.67.1", help="another version of --package that is on PyPI")
    ap.add_argument("--wheelhouse", default="/opt/wheels")
    args = ap.parse_args()
    from envbuild.testbed.chroot import rootfs

    work = Path(tempfile.mkdtemp(prefix="envbuild-imagebench-"))
    pm = Podman(work / "podman")
    try:
        t0 = time.monotonic()
        pm.import_rootfs(rootfs(), BASE)
        base_s = time.monotonic() - t0
        ctx = work / "context"
        r = subprocess.run([sys.executable, "-m", "envbuild", "render", "cpu-reference", "--target", "local",
                            "--format", "dockerfile", "-o", str(ctx), "--base", BASE, "--wheelhouse",
                            args.wheelhouse], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stdout + r.stderr)
        t0 = time.monotonic()
        cold = pm(*pm.build_args(ctx, "localhost/bench:cold"), timeout=1800)
        cold_s = time.monotonic() - t0
        t0 = time.monotonic()
        old, moved, recipe, lock = relock(work, args.package, args.to, args.wheelhouse)
        relock_s = time.monotonic() - t0
        ctx2 = work / "context-changed"
        r = subprocess.run([sys.executable, "-m", "envbuild", "render", str(recipe), "--target", "local",
                            "--lock", str(lock), "--format", "dockerfile", "-o", str(ctx2), "--base", BASE,
                            "--wheelhouse", args.wheelhouse], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stdout + r.stderr)
        t0 = time.monotonic()
        warm = pm(*pm.build_args(ctx2, "localhost/bench:changed"), timeout=1800)
        warm_s = time.monotonic() - t0
        verify = pm("run", "--rm", "--network=none", "localhost/bench:changed", "sh",
                    f"{PREFIX}/.envbuild/files/verify.sh", check=False)
        steps = steps_of(warm.stdout + warm.stderr)
        first_rebuilt = next((s for s in steps if not s["cached"] and s["instruction"] != "FROM"), None)
        result = {
            "schema": "envbuild.bench.image-build/1",
            "recipe": "cpu-reference", "base": BASE,
            "machine": {"cpus": __import__("os").cpu_count(), "kernel": platform.release(),
                        "podman": pm("--version").stdout.strip()},
            "base_import_s": round(base_s, 1),
            "cold_build_s": round(cold_s, 1),
            "change": {"package": args.package, "from": old, "to": args.to},
            "relock_s": round(relock_s, 1),
            "pins_moved": moved,
            "rebuild_s": round(warm_s, 1),
            "rebuild_share_of_cold": round(warm_s / cold_s, 3),
            "goal_share": 0.25,
            "rebuild_steps": steps,
            "reused_before_first_rebuilt": [s["text"] for s in steps if first_rebuilt and s["step"] < first_rebuilt["step"]],
            "first_rebuilt": first_rebuilt["text"] if first_rebuilt else None,
            "image_size_bytes": pm.size("localhost/bench:changed"),
            "base_size_bytes": pm.size(BASE),
            "verify_after_change_rc": verify.returncode,
            "cold_steps": len(steps_of(cold.stdout + cold.stderr)),
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
        mb = 1024 * 1024
        print(f"base import {base_s:.1f} s; cold build {cold_s:.1f} s; re-lock {relock_s:.1f} s moved "
              f"{', '.join(m['name'] + ' ' + str(m['old']) + ' -> ' + str(m['new']) for m in moved) or 'nothing'}; "
              f"after {args.package} {old} -> {args.to}: rebuild {warm_s:.1f} s ({100 * warm_s / cold_s:.0f} % of cold; "
              f"first rebuilt: {result['first_rebuilt']}); image {result['image_size_bytes'] / mb:.0f} MiB "
              f"(base {result['base_size_bytes'] / mb:.0f} MiB); verify rc {verify.returncode}")
        return 0 if verify.returncode == 0 else 1
    finally:
        pm.remove_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
