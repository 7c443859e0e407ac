"""envbuild's node side: the files that run on a provisioned node (or inside an image, or in a
job's folder) under that node's Python, standard library only, importing nothing of the
controller. Its modules import each other relatively, so the package works under any name.

* ``actions``: run primitive actions (``envbuild.actions.model`` as data);
* ``effects``: check the effects of plan steps (``envbuild.actions.effects`` as data);
* ``state``: which plan steps must run, and marking a step done;
* ``textpatch``: declarative text patches, pure functions on text;
* ``treecache``: a source's in-tree build outputs, saved once per cache key and restored;
* ``stage``: where a node's copy of a fleet's archive came from (``provision --fanout``), pure;
* ``__main__``: the node tool, ``actions`` run from an action file (run.sh, images: below);
* ``observe``: what is really installed in an environment;
* ``probe``: the state probe (``state`` and ``observe`` in one process);
* ``task``: the work of Ansible's ``envbuild_actions`` and ``envbuild_state`` modules, as functions
  of their parameters (the modules call them; their action plugins run them through ``boot``);
* ``prefixhold``: the lock of a prefix, held on the node for as long as a run lasts;
* ``boot``: loads this package from the command line (see below);
* ``fetch_data``, ``verify_image``, ``rattler_create``, ``ib_addresses``: tools run as
  scripts. A file run as a script imports no sibling: it is copied alone.

How the package reaches a node, always as these same files:

* Ansible: ``module_utils/envbuild_node/`` of the collection ``envbuild.node`` holds a link to
  each file here (the wheel, ``ansible-galaxy collection build`` and a bundle carry the files
  themselves); AnsiballZ packs the modules the collection's modules import. The action plugins
  of ``envbuild_actions`` and ``envbuild_state`` send the files ``task`` imports in one command
  instead (``boot.py`` the program, the parameters on stdin: ``task``'s docstring).
* one command over SSH (the state probe, observe): ``boot.py`` is the program, the package
  its first argument (``envbuild.actions.nodestate.node_command``); nothing is written first.
* the node tool: run.sh, a Dockerfile and an Apptainer definition carry the files ``actions``
  needs as a folder ``envbuild_node/`` and run it, ``python3 <files>/envbuild_node ACTION.json``
  (``__main__.py`` loads the folder as the package; ``envbuild.render.shell``).
* a tool run as a script is copied (``envbuild.actions.assets``, group ``node``) to the node,
  into an image's build context, a ``run.sh``'s files or a job's folder.

``PYTHON_FLOOR`` is the oldest Python every file here runs under, stated here alone (the other
files say "the package's floor"): that of the oldest node a shipped target names. The shipped
targets name 3.8 as their oldest (azure-nd96: the Ubuntu 20.04 HPC image's python3; slurm:
Ubuntu 20.04 hosts and NGC 22.02; rtx4090-pod: NGC 23.04), so do the shipped recipes
(alpa-megatron, megatron-deepspeed-slurm, megatronapp), and ansible-core runs its modules on
nothing older (``_PY_MIN = (3, 8)`` in ansible/module_utils/basic.py of 2.19, which
requirements/dev.lock installs). ``boot.py`` and the node tool refuse an
older interpreter with a message; tests/node/test_node_package.py compiles and imports every file
here with this Python, checks that each imports only its standard library, and that no shipped
target or recipe names an older Python.
"""

PYTHON_FLOOR = (3, 8)
