"""The flows: each command's work, from a typed request to a typed outcome.

A CLI command parses its options into a request, calls one flow, and prints the outcome;
nothing else (``envbuild.cli``). The flows, one layer under the CLI (pyproject's
``[tool.importlinter]`` "layers" contract):

=========  ===========================================  ======================================
command    flow                                         request -> outcome
=========  ===========================================  ======================================
provision  ``envbuild.provision.provision``             ``ProvisionOptions -> ProvisionOutcome``
verify     ``envbuild.flows.verify.verify_run``          ``VerifyRequest -> VerifyOutcome``
launch     ``envbuild.flows.launch.launch``              ``LaunchRequest -> LaunchOutcome``
render     ``envbuild.flows.render.render``              ``RenderRequest -> RenderOutcome``
draft      ``envbuild.flows.draft.draft``                ``DraftRequest -> DraftOutcome``
port       ``envbuild.flows.port.port``                  ``PortRequest -> PortOutcome``
=========  ===========================================  ======================================

Every flow that reaches nodes chooses them through one ``NodeSelection``
(``envbuild.connect.selection``): ``--hosts``/``--inventory``/``--local`` with the SSH key and
the known_hosts files. A provision run records its selection; verify and launch of that run
reach the nodes the same way.
"""
