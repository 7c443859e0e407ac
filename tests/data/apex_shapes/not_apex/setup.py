"""Some other project's setup.py (synthetic)."""
from setuptools import setup

setup(name="not-apex", version="0.1", py_modules=[])
