"""Rows about the DeepSpeed a recipe installs, against the node's torch."""

from __future__ import annotations

from envbuild.compat.context import Context
from envbuild.compat.rule import Rule
from envbuild.versions import version_lt

# deepspeed/elasticity/elastic_agent.py imports `log` and `_get_socket_with_port` from
# torch.distributed.elastic.agent.server.api up to 0.14.3; 0.14.4 (deepspeedai/DeepSpeed#5654)
# takes get_free_port from torch.distributed.elastic.utils.distributed instead.
DS_ELASTIC_FIXED = "0.14.4"
TORCH_WITHOUT_SOCKET_HELPER = "2.4"  # pytorch/pytorch#125743 removed _get_socket_with_port


def _installed_deepspeed(ctx: Context) -> str | None:
    pkg = ctx.recipe.package("deepspeed")
    if pkg is None or pkg.preinstalled or not pkg.version[:1].isdigit():
        return None
    return pkg.version


def _elastic_agent(ctx: Context) -> str | None:
    ds = _installed_deepspeed(ctx)
    torch = ctx.torch.version.split("+")[0] if ctx.torch else None
    if not ds or not torch or not version_lt(ds, DS_ELASTIC_FIXED) or version_lt(torch, TORCH_WITHOUT_SOCKET_HELPER):
        return None
    return (f"deepspeed {ds} imports log and _get_socket_with_port from "
            f"torch.distributed.elastic.agent.server.api, which torch {torch} no longer has: "
            "`import deepspeed` fails with ImportError")


RULES: list[Rule] = [
    Rule("deepspeed-elastic-agent-torch24", "error", "this DeepSpeed cannot be imported with torch >= 2.4",
         "DeepSpeed < 0.14.4 imports torch.distributed.elastic.agent.server.api.log (renamed logger in "
         "torch 2.3) and _get_socket_with_port (removed in torch 2.4, pytorch/pytorch#125743) at import time",
         "https://github.com/deepspeedai/DeepSpeed/issues/5603",
         f"pin deepspeed >= {DS_ELASTIC_FIXED} (deepspeedai/DeepSpeed#5654), or an older torch",
         _elastic_agent),
]
