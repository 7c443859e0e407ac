#!/usr/bin/env python
"""envbuild Apex check: the compiled extensions import and agree with plain PyTorch.

Copied to nodes and run with the environment's interpreter (torch + stdlib only)::

    python apex_check.py --json            # on a node without Apex: status "skipped"
    python apex_check.py --json --require  # missing Apex is a failure

Checks, each reported separately:

* extensions: ``amp_C`` and ``fused_layer_norm_cuda`` must import (built by ``--cuda_ext``);
  ``apex_C`` (``--cpp_ext``) and ``fused_adam_cuda`` (``--deprecated_fused_adam``),
  ``xentropy_cuda``, ``fast_multihead_attn`` are optional and reported as found or not.
* ``apex.normalization.FusedLayerNorm`` vs ``torch.nn.LayerNorm``: outputs and input
  gradients agree within tolerance (fp32 on the GPU).
* ``apex.optimizers.FusedAdam`` vs ``torch.optim.Adam`` (no weight decay): parameters agree
  after a few steps on the same model and gradients.

Output: one JSON object, schema ``envbuild.smoke/1``, ``kind: apex``, ``status`` one of
``passed``, ``failed``, ``skipped``.
"""

import argparse
import importlib
import json
import sys

import torch

SCHEMA = "envbuild.smoke/1"
REQUIRED_EXT = ["amp_C", "fused_layer_norm_cuda"]
OPTIONAL_EXT = ["apex_C", "fused_adam_cuda", "xentropy_cuda", "fast_multihead_attn"]


def try_import(name):
    try:
        importlib.import_module(name)
        return "ok"
    except ImportError as exc:
        return "missing: %s" % exc
    except Exception as exc:  # noqa: BLE001 - an extension may fail to load (ABI, CUDA)
        return "error: %s: %s" % (type(exc).__name__, exc)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_layer_norm(device, tol):
    from apex.normalization import FusedLayerNorm
    torch.manual_seed(0)
    shape = (8, 64, 512)
    x = torch.randn(*shape, device=device, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    fused = FusedLayerNorm(shape[-1]).to(device)
    ref = torch.nn.LayerNorm(shape[-1]).to(device)
    with torch.no_grad():
        w, b = torch.randn(shape[-1]), torch.randn(shape[-1])
        fused.weight.copy_(w)
        fused.bias.copy_(b)
        ref.weight.copy_(w)
        ref.bias.copy_(b)
    y, y_ref = fused(x), ref(x_ref)
    g = torch.randn_like(y)
    y.backward(g)
    y_ref.backward(g)
    out_err, grad_err = rel_err(y, y_ref), rel_err(x.grad, x_ref.grad)
    return {"ok": out_err < tol and grad_err < tol, "output_rel_err": out_err,
            "grad_rel_err": grad_err, "tolerance": tol}


def check_adam(device, tol, steps=5):
    from apex.optimizers import FusedAdam
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)).to(device)
    ref_model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 64)).to(device)
    ref_model.load_state_dict(model.state_dict())
    opt = FusedAdam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    ref_opt = torch.optim.Adam(ref_model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    for _ in range(steps):
        x = torch.randn(32, 256, device=device)
        for m, o in ((model, opt), (ref_model, ref_opt)):
            o.zero_grad()
            m(x).pow(2).mean().backward()
            o.step()
    errs = [rel_err(p, q) for p, q in zip(model.parameters(), ref_model.parameters())]
    return {"ok": max(errs) < tol, "max_param_rel_err": max(errs), "steps": steps, "tolerance": tol}


def run(require=False):
    """All checks; returns the result dict."""
    result = {"schema": SCHEMA, "kind": "apex", "torch": torch.__version__, "cuda": torch.version.cuda}
    try:
        import apex
    except ImportError as exc:
        result.update(status="failed" if require else "skipped", ok=not require,
                      reason="skipped: apex not installed (%s)" % exc)
        return result
    result["apex_path"] = getattr(apex, "__file__", None)
    if not hasattr(apex, "normalization") and try_import("apex.normalization") != "ok":
        result.update(status="failed", ok=False,
                      reason="the 'apex' that imports is not NVIDIA Apex (no apex.normalization): %s"
                      % result["apex_path"])
        return result
    ext = {name: try_import(name) for name in REQUIRED_EXT + OPTIONAL_EXT}
    result["extensions"] = ext
    missing = [n for n in REQUIRED_EXT if ext[n] != "ok"]
    checks = {}
    if not torch.cuda.is_available():
        result["checks"] = checks
        result.update(status="failed" if missing else "skipped", ok=not missing,
                      reason=("required extensions missing: %s" % ", ".join(missing)) if missing
                      else "skipped: no CUDA device, numerical checks need a GPU")
        return result
    device = torch.device("cuda")
    for name, fn, tol in (("fused_layer_norm", check_layer_norm, 1e-5), ("fused_adam", check_adam, 1e-5)):
        try:
            checks[name] = fn(device, tol)
        except Exception as exc:  # noqa: BLE001 - report, do not crash
            checks[name] = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    result["checks"] = checks
    bad = [n for n, c in checks.items() if not c["ok"]]
    ok = not missing and not bad
    result.update(status="passed" if ok else "failed", ok=ok,
                  reason="all checks passed" if ok else
                  "; ".join(filter(None, ["required extensions missing: %s" % ", ".join(missing) if missing else "",
                                          "checks failed: %s" % ", ".join(bad) if bad else ""])))
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description="envbuild Apex extension and numerics check")
    p.add_argument("--require", action="store_true", help="missing Apex is a failure, not a skip")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = run(args.require)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print("apex: %s (%s)" % (result["status"], result["reason"]))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
