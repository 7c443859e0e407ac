"""Renderers: the same plan as Ansible variables (and later other formats)."""
