#!/usr/bin/env python
"""envbuild collective smoke check: torch.distributed all-reduce, right sum and bandwidth.

Copied to nodes and run with the environment's interpreter; imports only torch and stdlib::

    python collective.py --json                 # one rank per visible GPU (NCCL), or 2 CPU ranks (gloo)
    python collective.py --device cuda --nproc 2 --json  # NCCL over 2 GPUs, sizes 1 MiB .. 1 GiB
    python collective.py --nproc 2 --device cpu --json
    python collective.py --device cuda --node-gpus 4 --json  # one rank per GPU of the node's 4 this process sees
    torchrun --nproc_per_node 8 collective.py --json   # under a launcher: uses its env:// rendezvous

Each rank fills a tensor with ``rank + 1``; after the all-reduce every element must equal
``n(n+1)/2``. Timing: warmup, then ``--iters`` all-reduces between barriers, mean time per op.
Bandwidths follow nccl-tests' definitions: ``algbw = bytes / time`` and
``busbw = algbw * 2(n-1)/n`` (the per-link load of a ring all-reduce; 0 for one rank).
On GPUs the sizes sweep from 1 MiB to 1 GiB, doubling (as nccl-tests' ``-b 1M -e 1G -f 2``):
NCCL's bus bandwidth still climbs past 256 MiB, so a sweep that stops there under-reports a
healthy link. On the CPU (gloo) three small sizes keep it to seconds.
Output: one JSON object, schema ``envbuild.smoke/1``, ``kind: collective``: every size's row
(``results``), the peak (``max_busbw_gbps``), what was run (``config``: backend, ranks, the
largest size) and what the sweep cost (``sweep``: seconds, bytes each rank reduced; the host's
load averages before and after).

Which GPUs ranks go to is decided here, on the node, at run time: ``--node-gpus N`` (the node's
count from its facts, nvidia-smi, which ignores ``CUDA_VISIBLE_DEVICES``) spawns one rank per GPU
of those N this process can see (``visible_gpus``): a job given ``CUDA_VISIBLE_DEVICES=2,3`` on a
4-GPU node runs 2 ranks. The record says so: ``gpus_node``, ``gpus_visible`` and
``cuda_visible_devices`` (the variable's value, null when unset).
"""

import argparse
import datetime
import json
import os
import shutil
import socket
import sys
import tempfile
import time

# What importing the environment costs this rank (issue 38): the seconds ``import torch`` takes
# and what Python opens and lists to do it (audit events; a shared library the dynamic loader
# maps is not counted: it opens no file through Python). Counted from here, before torch.
_SEEN = {"open": 0, "os.listdir": 0, "os.scandir": 0, "import": 0}


def _audit(event, _args):
    if event in _SEEN:
        _SEEN[event] += 1


if hasattr(sys, "addaudithook"):  # Python 3.8+
    sys.addaudithook(_audit)
_T0 = time.perf_counter()
import torch  # noqa: E402 - measured: see above
import torch.distributed as dist  # noqa: E402
_IMPORT_S = time.perf_counter() - _T0
_IMPORTED = dict(_SEEN)
# Network and parallel file systems (envbuild/launch/job.py keeps the same lists; a test compares
# them); an image mounted on the node is the node's own even when its file lies on one of them.
SHARED_FS = ("nfs", "nfs4", "lustre", "gpfs", "cifs", "smb", "ceph", "beegfs", "fuse.")
NODE_IMAGE_FS = ("fuse.squashfuse", "squashfs")

SCHEMA = "envbuild.smoke/1"
GPU_SIZES = [(1 << 20) << i for i in range(11)]  # 1 MiB, 2 MiB, ... 1 GiB
CPU_SIZES = [64 << 10, 1 << 20, 8 << 20]
CONNECT_TIMEOUT_S = 60.0  # joining the group and each collective; the sizes above take well under it

# NVLink multicast (NVLS) is left off: on shared hosts it can take GPUs out of service.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def fs_type(path, table=None):
    """The file system type of the mount ``path`` lies on: the longest mount point above it in
    ``table`` (the text of /proc/self/mounts, read when None; None where it cannot be read).

    >>> fs_type("/x/y", "dev / ext4 rw 0 0\\ndev /x tmpfs rw 0 0\\ndev /xy nfs rw 0 0\\n")
    'tmpfs'
    """
    if table is None:
        try:
            with open("/proc/self/mounts") as fh:
                table = fh.read()
        except OSError:
            return None
    path = os.path.realpath(path)
    best, kind = "", None
    for row in (line.split() for line in table.splitlines()):
        if len(row) < 3:
            continue
        point = row[1].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, row[2]
    return kind


def import_cost(rank):
    """This rank's cost of importing torch: where the environment lies (``prefix``, its file
    system type, ``shared`` for a network or parallel file system) and what the import took."""
    kind = fs_type(sys.prefix)
    shared = bool(kind) and kind.startswith(SHARED_FS) and kind not in NODE_IMAGE_FS
    return {"rank": rank, "host": socket.gethostname()[:255], "prefix": sys.prefix[-1024:], "fs_type": kind,
            "shared": shared, "seconds": round(_IMPORT_S, 4),
            "files_opened": _IMPORTED["open"] if hasattr(sys, "addaudithook") else None,
            "dirs_listed": (_IMPORTED["os.listdir"] + _IMPORTED["os.scandir"]) if hasattr(sys, "addaudithook") else None,
            "modules_imported": _IMPORTED["import"] if hasattr(sys, "addaudithook") else None}


def visible_gpus(node_gpus, cuda_visible_devices):
    """How many of the node's ``node_gpus`` GPUs a process sees, given its ``CUDA_VISIBLE_DEVICES``
    (``None``: unset, all of them; empty: none). CUDA enumerates the listed devices up to the
    first invalid entry (``-1`` hides the rest), and never more than the node has.

    >>> visible_gpus(4, None), visible_gpus(4, "2,3"), visible_gpus(4, ""), visible_gpus(4, "0,-1,2")
    (4, 2, 0, 1)
    """
    if cuda_visible_devices is None:
        return node_gpus
    seen = 0
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        seen += 1
    return min(seen, node_gpus)


def visibility(node_gpus, device_kind, env=None):
    """What the record says of the GPUs: the node's count (None when not given), those this
    process sees, and the ``CUDA_VISIBLE_DEVICES`` value it saw (None when unset)."""
    env = os.environ if env is None else env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if node_gpus is not None:
        seen = visible_gpus(node_gpus, cvd)
    else:
        seen = torch.cuda.device_count() if device_kind == "cuda" else 0
    return {"gpus_node": node_gpus, "gpus_visible": seen, "cuda_visible_devices": cvd}


def bus_factor(world):
    """nccl-tests' bus-bandwidth factor for all-reduce: 2(n-1)/n."""
    return 2.0 * (world - 1) / world


def measure(rank, world, device, sizes, iters, warmup):
    """All-reduce each size; return a list of per-size result dicts (rank 0 meaningful)."""
    rows = []
    expected = world * (world + 1) / 2.0
    for nbytes in sizes:
        numel = max(1, nbytes // 4)
        buf = None  # the previous size's buffer is freed before the next one is made
        buf = torch.empty(numel, dtype=torch.float32, device=device)
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        correct = bool((buf == expected).all().item())
        for _ in range(warmup):
            dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = (time.perf_counter() - t0) / iters
        # the slowest rank defines the time of a collective
        t = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = torch.tensor([1 if correct else 0], dtype=torch.int32, device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        elapsed = float(t.item())
        algbw = numel * 4 / elapsed / 1e9
        rows.append({"bytes": numel * 4, "dtype": "float32", "time_s": elapsed,
                     "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(world),
                     "correct": bool(flag.item())})
    return rows


def worker(rank, world, init_method, backend, device_kind, sizes, iters, warmup, out_path,
           timeout_s=CONNECT_TIMEOUT_S):
    """One rank: join the group, measure, rank 0 writes the JSON result to ``out_path``.

    Joining and every collective are bounded by ``timeout_s``: a rendezvous that cannot connect
    (a host whose loopback is down, a peer that never comes) fails within it, naming the
    address it waited on, instead of sitting silent until the smoke's own limit."""
    if device_kind == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    where = init_method if init_method != "env://" else "env:// (%s:%s)" % (
        os.environ.get("MASTER_ADDR", "?"), os.environ.get("MASTER_PORT", "?"))
    try:
        dist.init_process_group(backend, init_method=init_method, world_size=world, rank=rank,
                                timeout=datetime.timedelta(seconds=timeout_s))
    except Exception as exc:  # noqa: BLE001 - one line a reviewer can act on
        raise RuntimeError("rank %d could not join the process group at %s within %.0f s (%s: %s)" % (
            rank, where, timeout_s, type(exc).__name__, str(exc).strip().splitlines()[-1][:200]
            if str(exc).strip() else "")) from None
    # every rank's own import (a process per rank under a launcher), gathered on the group's device
    costs = gather_json(import_cost(rank), world, device) if init_method == "env://" else None
    load_before = _loadavg()
    t0 = time.perf_counter()
    try:
        rows = measure(rank, world, device, sizes, iters, warmup)
    finally:
        dist.barrier()
        dist.destroy_process_group()
    sweep = {"seconds": time.perf_counter() - t0, "iters": iters, "warmup": warmup,
             "bytes_per_rank": sum(r["bytes"] for r in rows) * (1 + warmup + iters),
             "loadavg_before": load_before, "loadavg_after": _loadavg()}
    if rank == 0 and out_path:
        result = summary(world, backend, device, rows, sweep)
        result["import_cost"] = costs if costs is not None else [import_cost(0)]
        with open(out_path + ".tmp", "w") as fh:
            json.dump(result, fh)
        os.replace(out_path + ".tmp", out_path)
    return rows


GATHER_BYTES = 4096


def gather_json(obj, world, device):
    """Every rank's ``obj`` (JSON of at most ``GATHER_BYTES``), in rank order: an all-gather of
    fixed-size byte tensors on ``device`` (``all_gather_object`` needs numpy, which an
    environment may lack)."""
    data = json.dumps(obj, sort_keys=True).encode()
    if len(data) > GATHER_BYTES:
        raise ValueError("rank record of %d bytes, more than %d" % (len(data), GATHER_BYTES))
    buf = list(len(data).to_bytes(4, "big")) + list(data) + [0] * (GATHER_BYTES - len(data))
    mine = torch.tensor(buf, dtype=torch.uint8, device=device)
    every = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    out = []
    for t in every:
        raw = bytes(t.tolist())
        size = int.from_bytes(raw[:4], "big")
        out.append(json.loads(raw[4:4 + size].decode()))
    return out


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def summary(world, backend, device, rows, sweep=None):
    nccl = None
    if backend == "nccl":
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:  # noqa: BLE001 - informative only
            nccl = None
    return {
        "schema": SCHEMA, "kind": "collective", "op": "all_reduce",
        "ok": bool(rows) and all(r["correct"] for r in rows),
        "backend": backend, "world_size": world, "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__, "cuda": torch.version.cuda, "nccl_version": nccl,
        "busbw_formula": "algbw * 2(n-1)/n",
        "config": {"backend": backend, "world_size": world,
                   "min_bytes": min(r["bytes"] for r in rows) if rows else None,
                   "max_bytes": max(r["bytes"] for r in rows) if rows else None, "sizes": len(rows)},
        "sweep": sweep,
        "results": rows,
        "max_busbw_gbps": max(r["busbw_gbps"] for r in rows) if rows else None,
        "max_algbw_gbps": max(r["algbw_gbps"] for r in rows) if rows else None,
    }


def _spawn_entry(rank, *args):
    worker(rank, *args)


def run(nproc=None, device="auto", sizes=None, iters=20, warmup=5, timeout_s=CONNECT_TIMEOUT_S,
        node_gpus=None):
    """Spawn ranks on this host (or join a launcher's group) and return the result dict.

    Without ``nproc``: one rank per GPU of the node's ``node_gpus`` this process sees
    (``visible_gpus``), else one per GPU torch sees, or 2 on the CPU."""
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError("--device cuda, but torch %s (CUDA %s) sees no GPU" % (
            torch.__version__, torch.version.cuda))
    backend = "nccl" if use_cuda else "gloo"
    kind = "cuda" if use_cuda else "cpu"
    sizes = sizes or (GPU_SIZES if use_cuda else CPU_SIZES)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun / srun with env
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        if use_cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        worker(rank, world, "env://", backend, kind, sizes, iters, warmup, path if rank == 0 else None, timeout_s)
        if rank != 0:
            os.unlink(path)
            return None
        with open(path) as fh:
            result = json.load(fh)
        os.unlink(path)
        result.update(visibility(node_gpus, kind))
        return result
    seen = visibility(node_gpus, kind)
    if nproc is None:
        nproc = seen["gpus_visible"] if node_gpus is not None else (torch.cuda.device_count() if use_cuda else 2)
        if nproc < 1:
            raise ValueError("none of the node's %s GPUs is visible to this process (CUDA_VISIBLE_DEVICES=%r)" % (
                node_gpus, seen["cuda_visible_devices"]))
    if nproc < 1:
        raise ValueError("need at least one rank")
    if use_cuda and nproc > torch.cuda.device_count():
        raise RuntimeError("%d ranks, but torch sees %d GPUs (CUDA_VISIBLE_DEVICES=%r)" % (
            nproc, torch.cuda.device_count(), seen["cuda_visible_devices"]))
    # The ranks of one host meet through a file, not a port picked ahead: a port found free here
    # can be taken by another process before rank 0 binds it (seen on a busy CI machine).
    meet = tempfile.mkdtemp(prefix="envbuild-collective-")
    init = "file://" + os.path.join(meet, "rendezvous")
    path = os.path.join(meet, "result.json")
    try:
        import torch.multiprocessing as mp
        mp.spawn(_spawn_entry, args=(nproc, init, backend, kind, sizes, iters, warmup, path, timeout_s),
                 nprocs=nproc, join=True)
        with open(path) as fh:
            result = json.load(fh)
        result.update(seen)
        return result
    finally:
        shutil.rmtree(meet, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description="envbuild all-reduce smoke check (algbw/busbw)")
    p.add_argument("--nproc", type=int, help="ranks to spawn (default: GPUs, or 2 on CPU)")
    p.add_argument("--node-gpus", type=int,
                   help="the node's GPU count (its facts): without --nproc, one rank per GPU of them "
                        "this process sees (CUDA_VISIBLE_DEVICES when set)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--sizes", help="comma-separated message sizes in bytes")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--timeout", type=float, default=CONNECT_TIMEOUT_S,
                   help="seconds to join the group and for each collective (default %(default)s)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    try:
        result = run(args.nproc, args.device, sizes, args.iters, args.warmup, args.timeout, args.node_gpus)
    except Exception as exc:  # noqa: BLE001 - report as JSON, not a traceback
        result = {"schema": SCHEMA, "kind": "collective", "ok": False, "torch": torch.__version__,
                  "error": "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else ""),
                  **visibility(args.node_gpus, "cpu" if args.device == "cpu" else "cuda")}
    if result is None:  # non-zero rank under a launcher
        return 0
    if args.json:
        print(json.dumps(result, sort_keys=True))
    elif "error" in result:
        print("error: " + result["error"])
    else:
        for r in result["results"]:
            print("%12d B  %8.3f ms  algbw %8.2f GB/s  busbw %8.2f GB/s  %s" % (
                r["bytes"], r["time_s"] * 1e3, r["algbw_gbps"], r["busbw_gbps"],
                "ok" if r["correct"] else "WRONG SUM"))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
