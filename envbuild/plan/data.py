"""The data step of a source tree: the recipe's downloads (``data``) decided for one node.

Pure: the planner calls :func:`data_step` after a tree's checkout and patches, before its
build commands (which read the files). Each file goes to ``<tree>/<path>``; with
``--data-mirror DIR`` it is taken from ``DIR/<file>`` when there (offline nodes; the folder
must be readable on the node, like ``--wheelhouse``), else downloaded from its URL. The node
side (``envbuild/node/fetch_data.py``) checks the sha256 the recipe gives, or the
one recorded by the first fetch, and records it in ``<prefix>/.envbuild/data/<name>.sha256``.
"""

from __future__ import annotations

from envbuild.plan import params as P
from envbuild.plan.model import Step
from envbuild.recipes.schema import GitSource, Recipe


def data_step(recipe: Recipe, src: GitSource, dest: str, prefix: str,
              data_mirror: str | None, bundled: dict[str, str] | None = None) -> Step | None:
    """The step fetching the recipe's data files for the tree of ``src`` at ``dest`` (None
    when the recipe downloads nothing into it). ``bundled``: an offline bundle's data files
    (``{file: sha256}``, ``data_mirror`` its node copy): each file must have the digest the
    bundle recorded when packing it (the recipe's, where the recipe has one)."""
    files = [d for d in recipe.data if d.component == src.name]
    if not files:
        return None
    if bundled is not None:
        specs = [P.DataFileSpec(name=d.name, url=d.url, dest=f"{dest.rstrip('/')}/{d.path}",
                                sha256=d.sha256 or bundled.get(d.mirror_name),
                                mirror=f"{(data_mirror or '').rstrip('/')}/{d.mirror_name}", decompress=d.decompress)
                 for d in files]
        return Step(id=f"data:{src.name}", title=f"{len(files)} data file(s) for {src.name}",
                    params=P.DataParams(component=src.name, files=specs, tree=dest,
                                        record_dir=f"{prefix.rstrip('/')}/.envbuild/data"),
                    reason="the bundle's copies of the published downloads, each checked against the "
                           "sha256 the bundle recorded when packing it (the recipe's where it has one); "
                           "no network")
    specs = [P.DataFileSpec(name=d.name, url=d.url, dest=f"{dest.rstrip('/')}/{d.path}", sha256=d.sha256,
                            mirror=f"{data_mirror.rstrip('/')}/{d.mirror_name}" if data_mirror else None,
                            decompress=d.decompress)
             for d in files]
    unchecked = [d.name for d in files if d.sha256 is None]
    reason = ("the published downloads, each checked against its sha256 and recorded on the node"
              + (f"; without a digest in the recipe ({', '.join(unchecked)}): the first fetch's "
                 "digest is recorded and later fetches must match it" if unchecked else "")
              + (f"; from the data mirror {data_mirror} when the file is there" if data_mirror else ""))
    return Step(id=f"data:{src.name}", title=f"{len(files)} data file(s) for {src.name}",
                params=P.DataParams(component=src.name, files=specs, tree=dest,
                                    record_dir=f"{prefix.rstrip('/')}/.envbuild/data"),
                reason=reason)
