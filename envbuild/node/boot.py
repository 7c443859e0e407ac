"""Run a module of envbuild's node package on a node in one command, nothing written first.

The controller (``envbuild.actions.nodestate.node_command``) sends this file's text as the
program and the package itself as the first argument::

    PYTHON -E -c "<this file>" PACKAGE MODULE [ARG ...]

PACKAGE is the package's files as JSON (``[[name, text], ...]``), zlib-compressed and
base64-encoded. They are imported from memory as the package ``envbuild_node`` (the name they
have in Ansible's module_utils too; they import each other relatively), and MODULE runs as
``python -m envbuild_node.MODULE ARG ...`` would run it. The state probe (``probe``) and the
observe script (``observe``) reach a node so. An interpreter older than the package's
``PYTHON_FLOOR`` is refused with a message (exit 1) before any other module is compiled: this
file and ``__init__.py`` keep to what any Python 3 parses.

``python -c`` puts the working folder first on ``sys.path``: it is taken off before anything
is imported (as Ansible's AnsiballZ wrapper does), so a ``json.py`` or ``copy.py`` in the node
user's home does not stand in for the standard library's.
"""
import sys

sys.path[:] = [p for p in sys.path if p not in ("", ".")]

import base64  # noqa: E402 - after the working folder left sys.path
import importlib.abc  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import runpy  # noqa: E402
import zlib  # noqa: E402

PACKAGE = "envbuild_node"


class Package(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """``envbuild_node`` and its modules, from ``{name: source text}``."""

    def __init__(self, files):
        self.files = files

    def _name(self, fullname):
        if fullname == PACKAGE:
            return "__init__"
        head, _, tail = fullname.partition(".")
        return tail if head == PACKAGE and tail and "." not in tail and tail != "__init__" else None

    def find_spec(self, fullname, path=None, target=None):
        name = self._name(fullname)
        if name not in self.files:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin="<%s/%s.py>" % (PACKAGE, name),
                                               is_package=name == "__init__")

    def is_package(self, fullname):
        return self._name(fullname) == "__init__"

    def get_source(self, fullname):
        return self.files[self._name(fullname)]

    def get_code(self, fullname):
        name = self._name(fullname)
        return compile(self.files[name], "<%s/%s.py>" % (PACKAGE, name), "exec", dont_inherit=True)


def main(argv):
    files = dict(json.loads(zlib.decompress(base64.b64decode(argv[0])).decode("utf-8")))
    sys.meta_path.insert(0, Package(files))
    floor = tuple(importlib.import_module(PACKAGE).PYTHON_FLOOR)
    if tuple(sys.version_info[:2]) < floor:
        sys.exit("envbuild's node code needs Python %s or newer; %s is Python %s"
                 % (".".join(str(n) for n in floor), sys.executable, sys.version.split()[0]))
    sys.argv = [sys.argv[0]] + list(argv[2:])
    runpy.run_module("%s.%s" % (PACKAGE, argv[1]), run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
