"""How the controller reaches a node, below everything that plans or gathers: the inventory's
``Node`` (``nodes``), commands on the controller itself (``local``, its processes in ``procfs``),
commands and files over SSH through Fabric with host keys checked as ssh checks them (``ssh``,
``hostkeys``), and the ``Runner`` that facts gathering calls (``runners``). Side effects live
here and in ``envbuild.execute`` (the playbook through ansible-runner)."""
