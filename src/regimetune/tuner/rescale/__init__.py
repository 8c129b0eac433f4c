"""Pufferscale rescaling: the planner, its exact reference, lower bounds, campaign simulation
and the tuning of its weights W_L, W_D, W_T."""

from regimetune.tuner.rescale.bounds import cheriere_decommission_time, placement_lower_bound
from regimetune.tuner.rescale.campaign import (
    CampaignResult,
    CampaignSpec,
    ScenarioRuns,
    run_scenario,
    simulate_campaign,
)
from regimetune.tuner.rescale.exact import ExactSolution, solve_exact
from regimetune.tuner.rescale.planner import (
    ArrayPlan,
    Targets,
    compute_targets,
    plan_arrays,
    plan_rescale,
)
from regimetune.tuner.rescale.tuning import WeightTuningReport

__all__ = [
    "ArrayPlan",
    "CampaignResult",
    "CampaignSpec",
    "ExactSolution",
    "ScenarioRuns",
    "Targets",
    "WeightTuningReport",
    "cheriere_decommission_time",
    "compute_targets",
    "placement_lower_bound",
    "plan_arrays",
    "plan_rescale",
    "run_scenario",
    "simulate_campaign",
    "solve_exact",
]
