"""Where the tests' shared files lie, named once: a test module sits in a folder of its layer
(``tests/<layer>/test_*.py``), so it names these instead of climbing from its own ``__file__``.

    >>> (DATA / "runs").is_dir() and (ROOT / "pyproject.toml").is_file()
    True
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]  # tests/
ROOT = TESTS.parent  # the checkout
DATA = TESTS / "data"  # inputs the tests read (recipes, logs, runs, locks...)
FIXTURES = TESTS / "fixtures"  # output captured on real nodes (fixtures/nodes/)
GOLDEN = TESTS / "golden"  # committed expected outputs (plans, launch scripts, reports)
