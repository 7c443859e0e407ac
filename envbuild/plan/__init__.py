"""Planning: the typed plan (``model``, ``params``) and the pure planner (``build``,
``resolve``) of a node's or an image's environment, with the smoke runs (``smoke``) and the
output capture (``capture``) it schedules.

A regular package, as every other of envbuild's: import-linter (grimp) builds its graph from
regular packages only, and saw none of plan's modules while this file was missing.
"""
