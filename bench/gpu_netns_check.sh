#!/usr/bin/env bash
# On a lent GPU machine of 2 GPUs or more (device `run`, kind nvidia-h200-x2), from the repository
# root: does bench/gpu_session.sh's own_net let two jobs of one wave rendezvous on the same port?
# Two torch.distributed.run jobs of 2 ranks each (an NCCL all_reduce over GPUs 0 and 1, held 4 s)
# start side by side, first each in a network namespace of its own (gpu_session.sh own-net), then
# both in the machine's (the control: the second's store cannot listen on 29500). Records go to
# $OUT (own-a.txt, own-b.txt, plain-c.txt, plain-d.txt), and the summary (each job's exit code and
# each pair's seconds) is printed and kept as $OUT/summary.txt beside them.
set -u
PY=${PY:-/opt/torch/.venv/bin/python}
OUT=${OUT:-/tmp/netns-check}
mkdir -p "$OUT" && : > "$OUT/summary.txt"
nvidia-smi -L
if unshare --net true; then echo "unshare --net: allowed"; else echo "unshare --net: refused"; fi
command -v ip || echo "no ip here (own_net brings lo up with python3's ioctls)"
cat > /tmp/ar.py <<'PYEOF'
import os, time, torch, torch.distributed as dist
lr = int(os.environ["LOCAL_RANK"]); torch.cuda.set_device(lr)
dist.init_process_group("nccl")
r = dist.get_rank(); t = torch.ones(1, device="cuda") * (r + 1); dist.all_reduce(t)
torch.cuda.synchronize(); time.sleep(4)
print("job", os.environ.get("JOB"), "rank", r, "sum", t.item(), "port", os.environ["MASTER_PORT"], flush=True)
dist.destroy_process_group()
PYEOF
job() {  # NAME WRAPPER...: a 2-rank job under WRAPPER (gpu_session.sh own-net, or env: none)
  JOB=$1 NCCL_DEBUG=WARN timeout 120 "${@:2}" "$PY" -m torch.distributed.run --nproc_per_node 2 /tmp/ar.py
}
echo "== own namespaces, side by side"; t0=$(date +%s)
job A bash bench/gpu_session.sh own-net > "$OUT/own-a.txt" 2>&1 &
job B bash bench/gpu_session.sh own-net > "$OUT/own-b.txt" 2>&1; rb=$?; wait $!; ra=$?
echo "A rc $ra, B rc $rb, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"; grep -h "sum\|own_net\|Error" "$OUT"/own-*.txt | head
echo "== no namespaces, side by side"; t0=$(date +%s)
job C env > "$OUT/plain-c.txt" 2>&1 & sleep 1
job D env > "$OUT/plain-d.txt" 2>&1; rd=$?; wait $!; rc=$?
echo "C rc $rc, D rc $rd, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"; grep -h "sum\|EADDRINUSE\|address already in use" "$OUT"/plain-*.txt | head -5
