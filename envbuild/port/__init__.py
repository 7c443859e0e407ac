"""``envbuild port``: a published recipe moved to the GPUs at hand, as a variant recipe.

Pure planning over envbuild's tables and the git mirror: ``tables`` (the knowledge it reads,
envbuild/port/data/*.yaml), ``stack`` (torch / CUDA / Python for the nodes), ``apex`` (the Apex
commit and options by the preflight's Apex rows), ``scan`` (the known fixes read from a pinned
tree), and the variant's composition: ``state`` (one port's state), ``environment`` (name,
stack, environment, packages), ``vendored`` (a source whose commit its mirror lacks, moved past),
``sources`` (Apex, packages read at their release tag),
``fixes`` (the rows read in every source's tree), ``launch`` (launcher, scheduler launches,
downloads) and ``compose`` (the steps in order, then the preflight of the result). The flow is
``envbuild.flows.port``.
"""
