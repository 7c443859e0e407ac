"""Image build of cpu-reference: cold, then after one locked package changes; image size.

    python bench/image_build.py [--out bench/results/image-build.json] [--package tqdm --to 4.67.1]

1. Fresh podman storage (and TMPDIR, where buildah keeps RUN cache mounts) under a temp dir,
   the chroot testbed's cached bookworm rootfs imported as the base (timed apart).
2. ``envbuild render cpu-reference --target local --format dockerfile --base BASE
   --wheelhouse /opt/wheels``; cold ``podman build --isolation chroot`` (torch from the
   context's wheelhouse/, the other locked packages from PyPI).
3. One locked package moved to another version that exists on PyPI, in the rendered
   requirements file (with that release's wheel sha256 from PyPI's JSON API), in the
   context's lock copy and in verify.json, as a regenerated lock would; rebuild.
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


def wheel_sha256(name: str, version: str) -> tuple[str, str]:
    """(filename, sha256) of the py3-none-any wheel of name==version, from PyPI's simple
    index (JSON form, PEP 691)."""
    import requests

    data = requests.get(f"https://pypi.org/simple/{name}/", timeout=60,
                        headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()
    for f in data["files"]:
        if f["filename"].startswith(f"{name}-{version}-") and f["filename"].endswith("-none-any.whl"):
            return f["filename"], f["hashes"]["sha256"]
    raise SystemExit(f"{name} {version}: no pure-Python wheel on PyPI")


def change_package(ctx: Path, name: str, new: str) -> str:
    """Move ``name`` to ``new`` in the rendered requirements, lock copy and verify.json."""
    filename, sha = wheel_sha256(name, new)
    reqs = next(p for p in (ctx / "files").rglob("pip-packages.txt"))
    text = reqs.read_text()
    old = re.search(rf"^{name}==(\S+) ", text, re.M).group(1)
    reqs.write_text(re.sub(rf"^{name}==\S+ --hash=sha256:[0-9a-f]+$", f"{name}=={new} --hash=sha256:{sha}", text, flags=re.M))
    spec = json.loads((ctx / "envbuild/verify.json").read_text())
    spec["packages"][name] = f"=={new}"
    (ctx / "envbuild/verify.json").write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    lock = (ctx / "envbuild.lock").read_text()
    block = re.search(rf"  - name: {name}\n(    .*\n|      .*\n)+", lock).group(0)
    new_block = block.replace(f"version: {old}", f"version: {new}").replace(f"requested: {old}", f"requested: {new}")
    new_block = re.sub(r"filename: .*", f"filename: {filename}", new_block)
    new_block = re.sub(r"sha256: [0-9a-f]+", f"sha256: {sha}", new_block)
    (ctx / "envbuild.lock").write_text(lock.replace(block, new_block))
    return old


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
        old = change_package(ctx, args.package, args.to)
        t0 = time.monotonic()
        warm = pm(*pm.build_args(ctx, "localhost/bench:changed"), timeout=1800)
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
        print(f"base import {base_s:.1f} s; cold build {cold_s:.1f} s; after {args.package} "
              f"{old} -> {args.to}: rebuild {warm_s:.1f} s ({100 * warm_s / cold_s:.0f} % of cold; "
              f"first rebuilt: {result['first_rebuilt']}); image {result['image_size_bytes'] / mb:.0f} MiB "
              f"(base {result['base_size_bytes'] / mb:.0f} MiB); verify rc {verify.returncode}")
        return 0 if verify.returncode == 0 else 1
    finally:
        pm.remove_all()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
