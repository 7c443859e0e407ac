"""Pack speed bench (issue 52, item 2: packs at disk speed): ``envbuild pack`` of cpu-reference,
gzip on one thread (``.tar.gz``, envbuild's pack before) against zstd on every core (``.tar.zst``,
the default now), each beside what the disk and the node's reader take.

    python bench/pack_speed.py [--prefix PREFIX] [--repeat 3] [--work DIR] [--out bench/results/pack-speed.json]

1. cpu-reference (the quick start's environment: torch 2.13.0 CPU and its stack, from
   /opt/wheels) provisioned once with ``envbuild provision --target local`` at ``--prefix``
   (kept between runs; an existing environment there is packed as it is);
2. for each format, ``--repeat`` times: ``envbuild.bundle.envpack.pack`` into ``--work`` (the
   same call the CLI makes: walk, tar, compress, sha256, manifest), timed; the pack's size;
3. once per format, the node's side as the job script runs it: ``sha256sum -c`` of the copy,
   then ``tar -xzf`` or ``tar -I zstd -xf`` into an empty folder, timed;
4. for scale, what no compressor can beat: GNU tar writing the prefix's uncompressed tar into a
   pipe (``tar -cf - | cat >/dev/null``: every file read, as a pack reads them; the tree is in the
   page cache after the first pack, as it is right after a provision) and ``dd`` writing a file of
   the larger pack's size with fsync.

Each row records the wall time, the CPU time of the process and its children, and the 1-minute
load average before and after (other work on a shared machine stretches wall times). The
figure of merit is ``speedup``: gzip's median pack time over zstd's (goal >= 3). Nothing is
asserted; writes the JSON file and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envbuild.bundle import envpack  # noqa: E402
from envbuild.fsio import write_atomic  # noqa: E402

RECIPE = "cpu-reference"
FORMATS = (("tar.gz", "tar -xzf"), ("tar.zst", "tar -I zstd -xf"))


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn) -> dict:
    load, c0, t0 = os.getloadavg()[0], cpu_s(), time.monotonic()
    fn()
    return {"s": round(time.monotonic() - t0, 2), "cpu_s": round(cpu_s() - c0, 2),
            "load1_before": round(load, 2), "load1_after": round(os.getloadavg()[0], 2)}


def provision(prefix: Path, home: Path) -> float:
    env = {**os.environ, "ENVBUILD_HOME": str(home)}
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "envbuild", "provision", RECIPE, "--target", "local", "--prefix",
                        str(prefix), "--wheelhouse", "/opt/wheels", "--json"],
                       capture_output=True, text=True, env=env, timeout=1800)
    if p.returncode not in (0, 5):
        sys.exit(f"provision failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return round(time.monotonic() - t0, 1)


def tree_size(prefix: Path) -> tuple[int, int]:
    files = size = 0
    for path in prefix.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            size += path.stat().st_size
    return files, size


def drop(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prefix", default="/tmp/envbuild-pack-bench/cpu-reference")
    ap.add_argument("--work", default="/tmp/envbuild-pack-bench/work")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pack-speed.json"))
    args = ap.parse_args()
    prefix, work = Path(args.prefix), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    provision_s = None
    if not (prefix / ".envbuild" / "env.sh").is_file():
        provision_s = provision(prefix, work / "home")
        print(f"provisioned {prefix} in {provision_s} s", flush=True)
    files, size = tree_size(prefix)
    print(f"{prefix}: {files} files, {size / 1e6:.0f} MB", flush=True)
    disk_read = timed(lambda: subprocess.run(["sh", "-c", 'tar -cf - -C "$0" . | cat >/dev/null', str(prefix)],
                                             check=True))
    rows = []
    for fmt, untar in FORMATS:
        out = work / f"{RECIPE}.{fmt}"
        runs = []
        for _ in range(args.repeat):
            drop(out)
            got: dict = {}
            row = timed(lambda: got.update(packed=envpack.pack(prefix, out)))  # noqa: B023 - timed() calls it at once
            runs.append(row)
            print(f"  pack {fmt}: {row['s']} s (cpu {row['cpu_s']} s)", flush=True)
        packed = got["packed"]
        copy, into = work / f"copy.{fmt}", work / f"unpacked-{fmt.replace('.', '-')}"
        shutil.copyfile(out, copy)
        drop(into)
        into.mkdir()
        check = timed(lambda: subprocess.run(["sh", "-c", f'echo "{packed.sha256}  {copy}" | sha256sum -c --status -'],  # noqa: B023
                                             check=True))
        unpack = timed(lambda: subprocess.run(["sh", "-c", f'{untar} "{copy}" -C "{into}"'], check=True))  # noqa: B023 - timed() calls it at once
        drop(copy)
        drop(into)
        rows.append({"format": fmt, "bytes": packed.bytes, "ratio": round(size / packed.bytes, 2),
                     "pack_s": [r["s"] for r in runs], "pack_median_s": statistics.median(r["s"] for r in runs),
                     "pack_runs": runs, "node_sha256_check": check, "node_unpack": unpack,
                     "node_unpack_command": untar})
    blob = work / "disk-write.bin"
    written = max(r["bytes"] for r in rows)
    disk_write = timed(lambda: subprocess.run(["dd", "if=/dev/zero", f"of={blob}", "bs=1M", f"count={written >> 20}",
                                               "conv=fsync", "status=none"], check=True))
    drop(blob)
    by = {r["format"]: r for r in rows}
    result = {"bench": "pack-speed", "recipe": RECIPE, "prefix": str(prefix), "provision_s": provision_s,
              "tree": {"files": files, "bytes": size}, "zstd_level": envpack.ZSTD_LEVEL,
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
              "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip(),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "disk": {"tar_uncompressed_to_pipe": disk_read, "write_pack_size_fsync": disk_write},
              "rows": rows,
              "speedup": round(by["tar.gz"]["pack_median_s"] / by["tar.zst"]["pack_median_s"], 2),
              "method": __doc__.split("\n\n")[2:4]}
    write_atomic(Path(args.out), json.dumps(result, indent=1) + "\n")
    print(f"\n{'format':8} {'MB':>6} {'ratio':>5} {'pack s (median)':>16} {'check s':>8} {'unpack s':>9}")
    for r in rows:
        print(f"{r['format']:8} {r['bytes'] / 1e6:6.0f} {r['ratio']:5.2f} {r['pack_median_s']:16.2f} "
              f"{r['node_sha256_check']['s']:8.2f} {r['node_unpack']['s']:9.2f}")
    print(f"uncompressed tar of the tree {disk_read['s']} s, write {written / 1e6:.0f} MB {disk_write['s']} s; "
          f"zstd is {result['speedup']}x gzip's speed; wrote {args.out}")


if __name__ == "__main__":
    main()
