"""Check an Apex wheel on a GPU node: its compiled extensions load against the node's torch and
compute what torch computes. For a wheel built somewhere else (this controller, with PyPI's torch
and nvcc) before any node installs it from a bundle.

    python bench/apex_check.py            # with the wheel's contents on sys.path (pip install --target)

Each check runs on the GPU and compares with torch's own result:
  * ``amp_C.multi_tensor_l2norm`` against ``torch.linalg.vector_norm`` over the same tensors;
  * ``amp_C.multi_tensor_scale`` against ``t * scale``;
  * ``apex.optimizers.FusedAdam`` (amp_C's multi_tensor_adam) against ``torch.optim.Adam`` for 5 steps;
  * ``apex.normalization.FusedLayerNorm`` (fused_layer_norm_cuda) against ``torch.nn.LayerNorm``,
    forward and backward;
  * ``apex_C.flatten`` / ``unflatten`` (C++ only) against ``torch.cat``.
Prints one line per check (name, largest difference, tolerance, ok) and where each module was
loaded from, then ``apex check: N of N ok``. Exit 0 all ok; 1 a check failed or a module did not
load; 2 no GPU.
"""

from __future__ import annotations

import sys


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("apex check: no GPU visible", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} (cuda {torch.version.cuda}, git {torch.version.git_version[:12]}) on "
          f"{torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
    try:
        import amp_C
        import apex
        import apex_C
        import fused_layer_norm_cuda
        from apex.multi_tensor_apply import multi_tensor_applier
        from apex.normalization import FusedLayerNorm
        from apex.optimizers import FusedAdam
    except ImportError as e:
        print(f"apex check: {e}")
        return 1
    for mod in (apex, amp_C, apex_C, fused_layer_norm_cuda):
        print(f"  {mod.__name__}: {mod.__file__}")
    torch.manual_seed(0)
    results: list[tuple[str, float, float]] = []

    tensors = [torch.randn(n, device=dev) for n in (1000, 4097, 65536)]
    overflow = torch.zeros(1, dtype=torch.int, device=dev)
    norm, _ = multi_tensor_applier(amp_C.multi_tensor_l2norm, overflow, [tensors], False)
    want = torch.linalg.vector_norm(torch.cat(tensors))
    results.append(("amp_C.multi_tensor_l2norm", abs(norm.item() - want.item()) / want.item(), 1e-5))

    outs = [torch.empty_like(t) for t in tensors]
    multi_tensor_applier(amp_C.multi_tensor_scale, overflow, [tensors, outs], 0.25)
    results.append(("amp_C.multi_tensor_scale", max((o - t * 0.25).abs().max().item() for o, t in zip(outs, tensors)),
                    1e-6))

    ref = [torch.nn.Parameter(torch.randn(512, 256, device=dev)), torch.nn.Parameter(torch.randn(256, device=dev))]
    fused = [torch.nn.Parameter(p.detach().clone()) for p in ref]
    opt_ref = torch.optim.Adam(ref, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    opt_fused = FusedAdam(fused, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, adam_w_mode=False)
    for _ in range(5):
        grads = [torch.randn_like(p) for p in ref]
        for p, q, g in zip(ref, fused, grads):
            p.grad, q.grad = g.clone(), g.clone()
        opt_ref.step()
        opt_fused.step()
    results.append(("apex.optimizers.FusedAdam (5 steps)",
                    max((p - q).abs().max().item() for p, q in zip(ref, fused)), 1e-5))

    x = torch.randn(64, 1024, device=dev, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    ln_ref, ln_fused = torch.nn.LayerNorm(1024).to(dev), FusedLayerNorm(1024).to(dev)
    y_ref, y_fused = ln_ref(x), ln_fused(x2)
    y_ref.sum().backward()
    y_fused.sum().backward()
    results.append(("FusedLayerNorm forward", (y_ref - y_fused).abs().max().item(), 1e-4))
    results.append(("FusedLayerNorm backward (input grad)", (x.grad - x2.grad).abs().max().item(), 1e-4))

    flat = apex_C.flatten(tensors)
    back = apex_C.unflatten(flat, tensors)
    results.append(("apex_C.flatten/unflatten", max((flat - torch.cat(tensors)).abs().max().item(),
                                                     *((a - b).abs().max().item() for a, b in zip(back, tensors))), 0.0))

    torch.cuda.synchronize()
    ok = 0
    for name, diff, tol in results:
        good = diff <= tol
        ok += good
        print(f"  {name}: max difference {diff:.3g} (tolerance {tol:g}): {'ok' if good else 'FAILED'}")
    print(f"apex check: {ok} of {len(results)} ok")
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
