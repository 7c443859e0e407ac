"""Draft a recipe from a published repository, read statically at one commit.

``envbuild draft SOURCE --ref REF`` (the flow: ``envbuild.flows.draft``) reads the repository's
files at the resolved commit through git only (``gitread``: ``git show``/``git ls-tree``, never a
checkout, never the repository's code), parses each kind of file with a pure parser
(``parse(text) -> rows with line numbers``: ``requirements``, ``setuppy``, ``setupcfg``,
``pyproject``, ``condaenv``, ``dockerfile``, ``readme``, ``gitmodules``; pip command lines in
``pipcmd``), gathers them (``survey``: which files, the ``-r`` closure, pinned VCS dependencies
followed through a git mirror) and writes a recipe skeleton (``compose``) in which every pin,
source and command cites ``file:line`` at that commit, and what could not be decided is an
``undecided:`` entry that ``envbuild check`` refuses until it is filled.
"""
