"""The flows: each command's work, from a typed request to a typed outcome.

A CLI command parses its options into a request, calls one flow, and prints the outcome;
nothing else (``envbuild.cli``). The CLI imports the flows, the record, display and the error
root only (pyproject's ``[tool.importlinter]`` contract "cli-thin"); the flows lie one layer
under it (the "layers" contract):

================  ==============================================  ==================================
command           flow                                            request -> outcome
================  ==============================================  ==================================
provision         ``envbuild.flows.provision.provision``          ``ProvisionRequest -> ProvisionOutcome``
plan              ``envbuild.flows.plan.plan``                    ``PlanRequest -> PlanOutcome``
verify            ``envbuild.flows.verify.verify_run``            ``VerifyRequest -> VerifyOutcome``
launch            ``envbuild.flows.launch.launch``                ``LaunchRequest -> LaunchOutcome``
render            ``envbuild.flows.render.render``                ``RenderRequest -> RenderOutcome``
draft             ``envbuild.flows.draft.draft``                  ``DraftRequest -> DraftOutcome``
port              ``envbuild.flows.port.port``                    ``PortRequest -> PortOutcome``
check             ``envbuild.flows.check.check``                  ``CheckRequest -> CheckOutcome``
lock              ``envbuild.flows.lock.lock``                    ``LockRequest -> LockOutcome``
bundle            ``envbuild.flows.bundle.bundle``                ``BundleRequest -> BundleOutcome``
pack              ``envbuild.flows.pack.pack``                    ``PackRequest -> PackOutcome``
report            ``envbuild.flows.report.report``                ``ReportRequest -> ReportOutcome``
attest            ``envbuild.flows.attest.attest``                ``AttestRequest -> AttestOutcome``
diff              ``envbuild.flows.diff.diff``                    ``DiffRequest -> DiffOutcome``
image-provenance  ``envbuild.flows.image.image_provenance``       ``ImageRequest -> ImageOutcome``
facts             ``envbuild.flows.facts.facts``                  ``FactsRequest -> FactsOutcome``
smoke             ``envbuild.flows.smoke.smoke``                  ``SmokeRequest -> SmokeOutcome``
parse             ``envbuild.flows.parse.parse``                  ``ParseRequest -> ParseOutcome``
imports           ``envbuild.flows.imports.imports``              ``ImportsRequest -> ImportsOutcome``
apex-patch        ``envbuild.flows.apex.apex_patch``              ``ApexRequest -> ApexOutcome``
recipes           ``envbuild.flows.recipes.recipes``              ``RecipesRequest -> RecipesOutcome``
show              ``envbuild.flows.recipes.show``                 ``ShowRequest -> ShowOutcome``
================  ==============================================  ==================================

``signing.py`` is the one signing of an artifact's provenance (bundle, pack, report,
image-provenance); ``choices.py`` what the CLI offers before a flow runs (completion names, the
signed statement's default validity).

Every flow that reaches nodes chooses them through one ``NodeSelection``
(``envbuild.connect.selection``), built from its request's ``reach``: a ``NodesRequest``
(``nodes.py``: ``--hosts``/``--inventory``/``--local`` with the SSH key and the known_hosts
files), the one type the CLI gives them as. A provision run records its selection; verify and
launch of that run reach the nodes the same way.
"""
