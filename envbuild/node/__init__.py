"""envbuild's node side: the files that run on a provisioned node (or inside an image, or in a
job's folder) under that node's Python, standard library only, importing nothing of the
controller. Its modules import each other relatively, so the package works under any name.

* ``actions``: run primitive actions (``envbuild.actions.model`` as data);
* ``effects``: check the effects of plan steps (``envbuild.actions.effects`` as data);
* ``state``: which plan steps must run, and marking a step done;
* ``textpatch``: declarative text patches, pure functions on text;
* ``observe``: what is really installed in an environment;
* ``probe``: the state probe (``state`` and ``observe`` in one process);
* ``boot``: loads this package from the command line (see below);
* ``apply_patch``, ``fetch_data``, ``verify_image``, ``rattler_create``, ``ib_addresses``:
  tools run as scripts, each importing no sibling but ``apply_patch`` (``textpatch`` beside it).

How the package reaches a node, always as these same files:

* Ansible: ``module_utils/envbuild_node/`` of the collection ``envbuild.node`` holds a link to
  each file here (the wheel, ``ansible-galaxy collection build`` and a bundle carry the files
  themselves); AnsiballZ packs the modules the collection's modules import.
* one command over SSH (the state probe, observe): ``boot.py`` is the program, the package
  its first argument (``envbuild.actions.nodestate.node_command``); nothing is written first.
* a tool run as a script is copied (``envbuild.actions.assets``, group ``node``) to the node,
  into an image's build context, a ``run.sh``'s files or a job's folder.
"""
