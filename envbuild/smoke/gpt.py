#!/usr/bin/env python
"""envbuild GPT smoke benchmark: a few real training steps of a small GPT, with MFU.

This file is copied to nodes and run with the ENVIRONMENT's own interpreter::

    python gpt.py --preset tiny --json
    python gpt.py --preset tiny --device cuda --json   # the tiny shape on the node's first GPU
    python gpt.py --preset 350m --dtype bf16 --json

It imports only torch and the standard library (no envbuild) and keeps to APIs that exist
from torch 1.8 on; newer features (torch.compile, scaled_dot_product_attention, fused AdamW,
bf16 autocast) are used when present and fall back otherwise.

What it measures, in one JSON object (schema ``envbuild.smoke/1``, ``kind: gpt``):

* ``tokens_per_s``: batch * seq / median step time over the timed steps (warmup excluded).
* ``tflops``: tokens_per_s * flops_per_token / 1e12, with the model-FLOPs formula
  (Chowdhery et al., PaLM, appendix B)::

      flops_per_token = 6 * N + 12 * L * H * S

  N = parameters that take part in matrix products (all parameters except the position
  embedding, which is a lookup; the token embedding counts once because it is tied to the
  output projection), L = layers, H = hidden size, S = sequence length. The 6 covers forward
  (2) and backward (4) multiply-adds; 12*L*H*S is the attention score and value products
  (counted for the full S x S matrix, not halved for the causal mask). Recomputation is not
  counted (this is model FLOPs, not hardware FLOPs).
* ``peak_tflops``: a square matmul in the same dtype measured in the same process (warmup,
  several rotating input sets of random data, synchronised): a short sample after each timed
  step, and the median of those samples is the peak. Paired with the steps, the peak sees what
  the steps saw (a shared CPU's other work, a hot GPU's clock), so the ratio is a same-hardware,
  same-moment figure: a peak taken while the CPU was idle and steps timed while it was busy
  made a healthy stack look broken (three runs at once on 2 cores: MFU as low as 0.064 that
  way, 0.19 at the lowest paired). The peaks before and after the steps are recorded beside
  it (``peak_matmul``).
* ``mfu`` = tflops / peak_tflops (against the measured peak, not a datasheet figure).
* ``loss``: the per-step losses on one fixed batch the model learns to predict; they must be
  finite and should fall.
"""

import argparse
import json
import math
import os
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SCHEMA = "envbuild.smoke/1"

PRESETS = {
    # CPU, a few seconds: checks that the stack trains at all (on a node with GPUs the plan
    # adds --device cuda: the same steps through the CUDA build, kernels and autocast).
    # One thread: the tiny model's operations are too small to gain from intra-op threads, and on a shared CPU a team of
    # threads waits at every operation for a member the scheduler took away (2 cores, three
    # smokes and two busy loops at once: 2 threads each 370-817 tokens/s, MFU 0.08-0.21;
    # 1 thread each 2361-3184 tokens/s, MFU 0.23-0.63; idle, 1 thread: MFU 0.52). The matmul
    # peak runs in the same process, so the ratio is one core's. --threads overrides it.
    "tiny": dict(layers=2, hidden=128, heads=4, seq=128, batch=8, vocab=4096,
                 steps=8, warmup=2, device="cpu", threads=1),
    # GPT-2 medium shape (~355M parameters), the MFU target on one GPU.
    "350m": dict(layers=24, hidden=1024, heads=16, seq=1024, batch=16, vocab=50304,
                 steps=20, warmup=5),
}


def torch_version_tuple():
    parts = []
    for piece in torch.__version__.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, hidden, heads, seq):
        super(Block, self).__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)
        if not HAS_SDPA:
            mask = torch.full((seq, seq), float("-inf")).triu(1)
            self.register_buffer("mask", mask)

    def attention(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).split(h, dim=2)
        q = q.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, h // self.heads).transpose(1, 2)
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att + self.mask[:s, :s].to(att.dtype)
            y = F.softmax(att.float(), dim=-1).to(q.dtype) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, h))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Pre-LayerNorm GPT-2 style decoder with a tied output projection."""

    def __init__(self, layers, hidden, heads, seq, vocab):
        super(GPT, self).__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList([Block(hidden, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(hidden)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        s = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(s, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.tok.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def count_params(model):
    """Parameters in matrix products: all but the position embedding."""
    total = sum(p.numel() for p in model.parameters())
    return total, total - model.pos.weight.numel()


def flops_per_token(n_params, layers, hidden, seq):
    """Model FLOPs per token for one training step: 6*N + 12*L*H*S (PaLM, appendix B)."""
    return 6 * n_params + 12 * layers * hidden * seq


class Timer(object):
    """Times regions on the device (CUDA events) or host; read only after the loop."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.marks = []

    def mark(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append(ev)
        else:
            self.marks.append(time.perf_counter())

    def intervals(self):
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) / 1000.0 for a, b in zip(self.marks, self.marks[1:])]
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return float("nan")
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


class MatmulPeak(object):
    """An n x n x n matmul in ``dtype`` on ``device``: inputs made and warmed once, then sampled."""

    def __init__(self, device, dtype, n=None):
        self.device, self.dtype = device, dtype
        self.n = n if n is not None else (8192 if device.type == "cuda" else 1024)
        self.chunk = 10 if device.type == "cuda" else 1
        sets = 3
        gen = torch.Generator(device="cpu").manual_seed(1234)
        self.pairs = [(torch.randn(self.n, self.n, generator=gen).to(device=device, dtype=dtype),
                       torch.randn(self.n, self.n, generator=gen).to(device=device, dtype=dtype))
                      for _ in range(sets)]
        self.out = torch.empty(self.n, self.n, device=device, dtype=dtype)
        self.calls = 0
        for _ in range(3):
            self._mm()
        if device.type == "cuda":
            torch.cuda.synchronize()

    def _mm(self):
        a, b = self.pairs[self.calls % len(self.pairs)]
        self.calls += 1
        torch.mm(a, b, out=self.out)

    def sample(self, repeats):
        """Seconds per matmul call, one figure per repeat (each the mean of ``chunk`` calls)."""
        timer = Timer(self.device)
        timer.mark()
        for _ in range(repeats):
            for _ in range(self.chunk):
                self._mm()
            timer.mark()
        if not bool(torch.isfinite(self.out.float().sum())):
            raise RuntimeError("matmul peak run produced non-finite output")
        return [t / self.chunk for t in timer.intervals()]

    def result(self, per_call):
        t = median(per_call)
        return {"n": self.n, "dtype": str(self.dtype).replace("torch.", ""), "median_s": t,
                "samples": len(per_call), "tflops": 2.0 * self.n ** 3 / t / 1e12}


def pick_dtype(name, device):
    if name == "auto":
        if device.type != "cuda":
            return torch.float32
        major = torch.cuda.get_device_capability(device)[0]
        return torch.bfloat16 if major >= 8 and torch_version_tuple() >= (1, 10) else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]


def autocast_ctx(device, dtype, enabled):
    """Mixed-precision context for the forward pass (a no-op where not applicable)."""
    if not enabled or dtype == torch.float32:
        return _Null()
    if hasattr(torch, "autocast"):
        return torch.autocast(device_type=device.type, dtype=dtype)
    if device.type == "cuda" and dtype == torch.float16:  # torch < 1.10
        return torch.cuda.amp.autocast()
    raise RuntimeError("this torch %s has no autocast for %s on %s" % (torch.__version__, dtype, device))


class _Null(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def make_optimizer(params, lr, device):
    """AdamW, fused where this torch has it, else foreach, else plain; returns (opt, kind)."""
    import inspect
    sig = inspect.signature(torch.optim.AdamW.__init__).parameters
    kw = dict(lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    if device.type == "cuda" and "fused" in sig:
        try:
            return torch.optim.AdamW(params, fused=True, **kw), "fused"
        except (RuntimeError, TypeError):
            pass
    if "foreach" in sig:
        return torch.optim.AdamW(params, foreach=True, **kw), "foreach"
    return torch.optim.AdamW(params, **kw), "plain"


def run(cfg):
    """Build the model, train ``warmup + steps`` steps on one fixed batch, return the result."""
    warnings = []
    device = pick_device(cfg)
    dtype = pick_dtype(cfg["dtype"], device)
    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    if cfg["hidden"] % cfg["heads"]:
        raise ValueError("hidden (%d) must be divisible by heads (%d)" % (cfg["hidden"], cfg["heads"]))

    model = GPT(cfg["layers"], cfg["hidden"], cfg["heads"], cfg["seq"], cfg["vocab"]).to(device)
    pure = cfg["params"] == "low" and dtype != torch.float32
    if pure:
        model = model.to(dtype)
    total, n_mm = count_params(model)
    opt, opt_kind = make_optimizer(model.parameters(), cfg["lr"], device)
    scaler = None
    if dtype == torch.float16 and not pure:
        scaler = torch.cuda.amp.GradScaler(init_scale=2.0 ** 12)

    step_model, compiled = compile_model(model, cfg, device, warnings)

    gen = torch.Generator(device="cpu").manual_seed(cfg["seed"])
    data = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), generator=gen).to(device)
    idx, targets = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def step():
        with autocast_ctx(device, dtype, not pure):
            loss = step_model(idx, targets)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    # The matmul peak is sampled right after every timed step, so steps and peak share the
    # machine's state (other work on a shared CPU, a GPU's clock); the peaks before and after
    # the steps are recorded beside it.
    probe = MatmulPeak(device, dtype, n=cfg.get("peak_n"))
    peak_before = probe.result(probe.sample(30 if device.type == "cuda" else 5))

    losses = []
    t0 = time.perf_counter()
    for _ in range(cfg["warmup"]):
        try:
            losses.append(step())
        except Exception as exc:  # noqa: BLE001 - a compile failure shows on the first call
            if compiled != "on":
                raise
            warnings.append("compiled step failed, eager instead: %s" % str(exc).splitlines()[0])
            step_model, compiled = model, "failed"
            losses.append(step())
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    warmup_s = time.perf_counter() - t0

    timed, step_times, paired = timed_steps(step, probe, device, cfg["steps"])
    losses.extend(timed)
    loss_values = [float(x) for x in losses]
    mem = torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else None

    peak_after = probe.result(probe.sample(30 if device.type == "cuda" else 5))
    peak = probe.result(paired)
    peak["before_tflops"], peak["after_tflops"] = peak_before["tflops"], peak_after["tflops"]
    figures = speed(cfg, n_mm, step_times, warmup_s, peak)
    finite, decreased = judge_loss(loss_values, warnings)

    result = {"schema": SCHEMA, "kind": "gpt", "ok": finite and decreased}
    result.update(environment(cfg, device, dtype, pure, compiled, opt_kind))
    result.update(params=total, params_matmul=n_mm, **figures)
    result.update(max_memory_gib=mem,
                  loss={"first": loss_values[0], "last": loss_values[-1], "values": loss_values,
                        "finite": finite, "decreased": decreased},
                  warnings=warnings)
    return result


def pick_device(cfg):
    """The torch device of ``--device`` (auto: the first GPU where torch sees one, else the CPU);
    on a GPU, TF32 matmuls allowed. A GPU asked for that torch does not see is an error."""
    device = torch.device(cfg["device"] if cfg["device"] != "auto" else
                          ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device %s, but torch %s (CUDA %s) sees no GPU" % (
            cfg["device"], torch.__version__, torch.version.cuda))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def compile_model(model, cfg, device, warnings):
    """(the model a step calls, "on" or "off"): torch.compile'd where ``--compile`` asks for it
    (auto: on a GPU) and this torch has it; else, or when compiling fails, eager, said in
    ``warnings``."""
    want_compile = cfg["compile"] == "on" or (cfg["compile"] == "auto" and device.type == "cuda")
    if not want_compile:
        return model, "off"
    if not hasattr(torch, "compile"):
        warnings.append("torch.compile not in torch %s; eager" % torch.__version__)
        return model, "off"
    try:
        return torch.compile(model), "on"
    except Exception as exc:  # noqa: BLE001 - any failure falls back to eager
        warnings.append("torch.compile failed, eager instead: %s" % exc)
        return model, "off"


def timed_steps(step, probe, device, steps):
    """(losses, seconds per step, matmul peak samples): each step timed alone, the peak sampled
    right after it (``MatmulPeak``)."""
    losses, step_times, paired = [], [], []
    for _ in range(steps):
        timer = Timer(device)
        timer.mark()
        losses.append(step())
        timer.mark()
        step_times.extend(timer.intervals())
        paired.extend(probe.sample(2))
    return losses, step_times, paired


def speed(cfg, n_mm, step_times, warmup_s, peak):
    """The speed figures of the result: step times, tokens/s, model TFLOP/s (``flops_per_token``)
    and MFU against the paired matmul peak."""
    fpt = flops_per_token(n_mm, cfg["layers"], cfg["hidden"], cfg["seq"])
    tokens_per_step = cfg["batch"] * cfg["seq"]
    t_step = median(step_times)
    tokens_per_s = tokens_per_step / t_step
    tflops = tokens_per_s * fpt / 1e12
    return {
        "flops_per_token": fpt,
        "flops_formula": "6*N + 12*L*H*S",
        "tokens_per_step": tokens_per_step,
        "step_time_s": {"median": t_step, "min": min(step_times), "max": max(step_times)},
        "step_times_s": step_times,
        "warmup_s": warmup_s,
        "tokens_per_s": tokens_per_s,
        "tflops": tflops,
        "peak_tflops": peak["tflops"],
        "peak_matmul": peak,
        "mfu": tflops / peak["tflops"],
    }


def judge_loss(loss_values, warnings):
    """(finite, decreased): every loss finite, and the mean of the last few below the mean of
    the first few; either failing is said in ``warnings``."""
    finite = all(math.isfinite(x) for x in loss_values)
    k = max(1, min(3, len(loss_values) // 3))
    decreased = finite and sum(loss_values[-k:]) / k < sum(loss_values[:k]) / k
    if not finite:
        warnings.append("non-finite loss")
    elif not decreased:
        warnings.append("loss did not decrease over %d steps" % len(loss_values))
    return finite, decreased


def environment(cfg, device, dtype, pure, compiled, opt_kind):
    """What the steps ran on and how: the device, torch and CUDA, the dtypes, compilation,
    attention, optimizer, the model's shape and the CPU threads."""
    return {
        "device": device.type,
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                        else platform.processor() or platform.machine()),
        "capability": ".".join(map(str, torch.cuda.get_device_capability(device))) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "dtype": str(dtype).replace("torch.", ""),
        "params_dtype": str(dtype if pure else torch.float32).replace("torch.", ""),
        "compile": compiled,
        "attention": "sdpa" if HAS_SDPA else "math",
        "optimizer": opt_kind,
        "config": {k2: cfg[k2] for k2 in ("layers", "hidden", "heads", "seq", "batch", "vocab", "steps", "warmup")},
        "threads": torch.get_num_threads() if device.type == "cpu" else None,
    }


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="envbuild GPT training-step smoke benchmark (MFU)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for name in ("layers", "hidden", "heads", "seq", "batch", "vocab", "steps", "warmup", "threads"):
        p.add_argument("--" + name, type=int)
    p.add_argument("--dtype", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                   help="auto: bf16 on sm_80+, fp16 with loss scaling on older GPUs, fp32 on CPU")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or auto (preset decides)")
    p.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                   help="torch.compile the model (auto: on for CUDA where torch has it)")
    p.add_argument("--params", choices=["fp32", "low"], default="fp32",
                   help="fp32 master weights with autocast (default) or weights in the low dtype")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peak-n", type=int, default=None, help="matmul size for the peak (8192 GPU)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="also write the JSON object to this file")
    args = p.parse_args(argv)
    cfg = dict(PRESETS[args.preset])
    cfg.setdefault("device", "auto")
    for key, value in vars(args).items():
        if value is not None and key not in ("preset", "json", "out"):
            cfg[key] = value
    cfg["preset"] = args.preset
    return args, cfg


def main(argv=None):
    args, cfg = parse_args(argv)
    try:
        result = run(cfg)
    except Exception as exc:  # noqa: BLE001 - report as JSON, not a traceback
        result = {"schema": SCHEMA, "kind": "gpt", "ok": False, "torch": torch.__version__,
                  "error": "%s: %s" % (type(exc).__name__, exc), "config": cfg}
    text = json.dumps(result, indent=None if args.json else 2, sort_keys=True)
    if args.out:
        with open(args.out + ".tmp", "w") as fh:
            fh.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    if args.json:
        print(text)
    else:
        if "error" in result:
            print("error: " + result["error"])
        else:
            print("%s %s %s: %.0f tokens/s, %.3g TFLOP/s of %.3g measured peak, MFU %.1f%%, loss %.3f -> %.3f"
                  % (result["device_name"], result["dtype"], "compiled" if result["compile"] == "on" else "eager",
                     result["tokens_per_s"], result["tflops"], result["peak_tflops"], 100 * result["mfu"],
                     result["loss"]["first"], result["loss"]["last"]))
    return 0 if result.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
