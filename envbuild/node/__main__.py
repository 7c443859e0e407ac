"""The node tool: run envbuild's primitive actions from a file, with the functions Ansible's
``envbuild_actions`` module runs (``actions.run_actions``: ``do_git``, ``do_patch``,
``do_wheel``, ``do_capture``). run.sh, a Dockerfile's RUN and an Apptainer ``%post`` call it so::

    PYTHON <files>/envbuild_node ACTION.json

``<files>/envbuild_node/`` holds the files of this package the actions need, as they are
(``envbuild.render.shell.NODE_TOOL_FILES``: ``__init__``, ``actions``, ``textpatch`` and this
file); ``ACTION.json`` holds one action or a list of them (``envbuild.actions.model`` as data,
what the module gets in its ``actions``). Run as a folder, this file cannot import its siblings
relatively: it loads its folder as the package ``envbuild_node`` (the name the files have in
Ansible's module_utils and under ``boot.py``). ``python -m envbuild.node ACTION.json`` runs the
same on the controller.

The actions run in order under this interpreter, with the environment it was given (its
``PATH``: the module gets the node's login PATH instead); a wheel build's output goes to stdout
as it comes (``actions.ECHO``). Exit status 0 when they all did (their log on stdout); when one
failed, its message on stderr and its exit status (a captured run's own: 124 for a timeout), 1
when it has none; every capture of the file has run and recorded its ``.out``, ``.err`` and
``.rc`` first. 2: the file holds no action; 130: interrupted (the running command's process
group ended first, as under the module). An interpreter older than the package's
``PYTHON_FLOOR`` is refused (exit 1), as ``boot.py`` refuses it: this file keeps to what any
Python 3 parses.
"""
import importlib
import importlib.util
import json
import os
import sys

PACKAGE = "envbuild_node"


def _package():
    """The name this package is imported under: its own (``python -m``), else ``envbuild_node``,
    loaded from this file's folder."""
    if __package__:
        return __package__
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]  # the siblings are members of the package, never top-level modules
    spec = importlib.util.spec_from_file_location(PACKAGE, os.path.join(here, "__init__.py"),
                                                  submodule_search_locations=[here])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return PACKAGE


def _status(rc):
    """A failed action's exit status as a process's: a signal's as the shell writes it."""
    if isinstance(rc, int) and 0 < rc < 256:
        return rc
    if isinstance(rc, int) and -64 < rc < 0:
        return 128 - rc
    return 1


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        sys.stderr.write("usage: python3 envbuild_node ACTION.json  (one action or a list, as JSON)\n")
        return 2
    name = _package()
    floor = tuple(importlib.import_module(name).PYTHON_FLOOR)
    if tuple(sys.version_info[:2]) < floor:
        sys.stderr.write("envbuild's node code needs Python %s or newer; %s is Python %s\n"
                         % (".".join(str(n) for n in floor), sys.executable, sys.version.split()[0]))
        return 1
    actions = importlib.import_module(name + ".actions")
    try:
        with open(argv[0], encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        sys.stderr.write("envbuild_node: cannot read %s: %s\n" % (argv[0], exc))
        return 2
    batch = data if isinstance(data, list) else [data]
    if not batch or not all(isinstance(a, dict) and isinstance(a.get("op"), str) for a in batch):
        sys.stderr.write("envbuild_node: %s holds no action (an object with an op, or a list of them)\n" % argv[0])
        return 2
    actions.ECHO = getattr(sys.stdout, "buffer", None)  # a build's output as it comes
    try:
        result = actions.run_actions(batch)
    except actions.ActionFailed as exc:
        sys.stderr.write(exc.msg.rstrip("\n") + "\n")
        return _status(exc.rc)
    except KeyboardInterrupt:  # the running command's group is gone already (actions._Interrupts)
        return 130
    for line in result["log"]:
        sys.stdout.write(line.rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
