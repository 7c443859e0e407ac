"""The variant's expected resource use (``resources:``): the published recipe's figures describe
the published hardware and stack, so they are carried as estimates, each saying so, never as
figures measured on the new nodes; the benchmark's GPUs are the variant's ``needs_gpus``."""

from __future__ import annotations

from envbuild.port.state import TEST, Port

#: where the rule comes from: what each basis claims (a measured figure names a run of its own)
SOURCE = ("envbuild/recipes/schema.py Resources: basis measured names a run recorded in docs/results, published "
          "the authors' page, estimate says how it was made; tests/recipes/test_recipe_resources.py")


def port_resources(p: Port) -> None:
    """Each published experiment's figures, basis ``estimate``, with a source that says they are
    carried from the published setup and not measured on the target's nodes (see module)."""
    published = p.data.get("resources") or []
    if not published:
        return
    gpus = (p.data.get("benchmark") or {}).get("needs_gpus")
    out = []
    for res in published:
        new = {**res, "basis": "estimate",
               "source": f"carried from {p.recipe.name} (its {res['basis']} figure: {res['source']}); not measured "
                         f"on {p.target.name}'s nodes"}
        if res["experiment"] == "provision":
            new["gpus"] = 0
        elif res["experiment"] == "benchmark" and gpus:
            new["gpus"] = gpus
        out.append(new)
    p.data["resources"] = out
    p.deviate("resources-carried", "; ".join(f"{r['experiment']}: {r['basis']}" for r in published),
              f"{p.recipe.name}'s resources describe the published hardware and stack; none was measured on "
              f"{p.target.name}'s nodes ({p.stack.label()})",
              "the same figures, basis estimate, each source saying it is carried from the published setup and "
              "not measured on the new nodes; provision needs no GPU, the benchmark the GPUs it needs "
              "(benchmark.needs_gpus)", SOURCE, ["envbuild.port.resources:port_resources"],
              [TEST + "test_port_carries_the_resources_as_estimates", "tests/recipes/test_recipe_resources.py::"
               "test_each_recipe_states_provision_and_its_benchmark"])
