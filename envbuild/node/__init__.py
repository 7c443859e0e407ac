"""envbuild's node side: the files that run on a provisioned node (or inside an image, or in a
job's folder) under that node's Python, standard library only, importing nothing of the
controller.

* ``actions``: run primitive actions (``envbuild.actions.model`` as data);
* ``effects``: check the effects of plan steps (``envbuild.actions.effects`` as data);
* ``state``: which plan steps must run, and marking a step done;
* ``textpatch``: declarative text patches, pure functions on text;
* ``observe``: what is really installed in an environment;
* ``apply_patch``, ``fetch_data``, ``verify_image``, ``rattler_create``, ``ib_addresses``:
  tools run as scripts.
"""
