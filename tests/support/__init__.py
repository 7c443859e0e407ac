"""What the test modules share beyond fixtures (those are in tests/conftest.py): the CLI run in
process or as a process (``clirun``), InfiniBand node facts for launch and facts tests
(``ib_inventory``), the Python at the node package's floor (``nodefloor``) and the captured H100
node (``h100``). ``tests/`` is on ``sys.path`` (its conftest.py is imported from there), so a test
imports ``from support.clirun import envbuild``."""
