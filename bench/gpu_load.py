"""A co-located load on one GPU: bursts of bf16 matmuls at a set duty cycle, until SIGTERM.

Used by bench/gpu_session.sh (a plan item ``load@GPUS``) to slow a benchmark that shares the GPU
with it, the way another tenant's job would: the GPU's own settings (clocks, power limit, MIG)
are never touched. Each period of ``--period-ms`` it keeps the GPU busy for ``--duty`` of the
period (matmuls, synchronised), then sleeps the rest. On SIGTERM it writes what it did to
``--record`` (JSON: GPU name, duty asked and achieved, busy and wall seconds, matmuls).

    CUDA_VISIBLE_DEVICES=0 python3 bench/gpu_load.py --duty 0.15 --record load-0.json &
"""

from __future__ import annotations

import argparse
import json
import signal
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duty", type=float, default=0.15, help="share of each period spent in matmuls")
    ap.add_argument("--period-ms", type=float, default=100.0)
    ap.add_argument("--size", type=int, default=4096, help="square matmul size (bf16)")
    ap.add_argument("--record", default=None)
    args = ap.parse_args()

    import torch

    dev = torch.device("cuda:0")
    a = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(args.size, args.size, device=dev, dtype=torch.bfloat16)
    stop = False

    def on_term(signum, frame):  # noqa: ANN001, ARG001 - signal handler
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    period = args.period_ms / 1000.0
    busy = 0.0
    matmuls = 0
    t_start = time.perf_counter()
    while not stop:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < args.duty * period and not stop:
            a @ b
            torch.cuda.synchronize(dev)
            matmuls += 1
        spent = time.perf_counter() - t0
        busy += spent
        rest = period - spent
        if rest > 0 and not stop:
            time.sleep(rest)
    wall = time.perf_counter() - t_start
    record = {"gpu": torch.cuda.get_device_name(dev), "duty_asked": args.duty, "period_ms": args.period_ms,
              "duty_achieved": busy / wall if wall else 0.0, "busy_s": busy, "wall_s": wall, "matmuls": matmuls,
              "size": args.size, "dtype": "bfloat16"}
    if args.record:
        with open(args.record, "w", encoding="utf-8") as fh:
            json.dump(record, fh)
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
