"""Executors: the only code that touches nodes (ansible-runner, Fabric/SSH, local processes)."""
