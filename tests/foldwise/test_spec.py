"""The study spec (DESIGN §3): parameter types, conditions, every validation rule, defaults."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from foldwise.space import (
    CategoricalParam,
    Comparison,
    ConditionError,
    FloatParam,
    IntParam,
    active_names,
    condition_order,
    contains,
    project,
)
from foldwise.spec import STORED, StudySpec

DESIGN_EXAMPLE = """
name: digits-mlp
objective: {metric: val_loss, direction: minimize}
space:
  lr:      {type: float, low: 1.0e-4, high: 0.3, log: true}
  depth:   {type: int, low: 1, high: 3}
  width_1: {type: int, low: 16, high: 256, log: true}
  width_2: {type: int, low: 16, high: 256, log: true, when: {depth: {gte: 2}}}
  act:     {type: categorical, choices: [relu, tanh, gelu]}
optimizer: {name: gp, seed: 0}
budget: {trials: 40}
parallel: {trial_groups: 2, folds: 5, workers_per_fold: 2}
resources: {cpus_per_worker: 1, gpus_per_worker: 0}
trainer: {task: digits_mlp, epochs: 10, batch_size: 64}
early_stopping: {patience: 3}
"""


@pytest.fixture
def doc() -> dict[str, Any]:
    return yaml.safe_load(DESIGN_EXAMPLE)


def errors_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as info:
        StudySpec.model_validate(document)
    return info.value.errors()


def assert_rejected(document: dict[str, Any], loc: tuple, fragment: str = "") -> None:
    """Exactly one error, at ``loc``, whose message contains ``fragment``."""
    [error] = errors_of(document)
    assert error["loc"] == loc
    assert fragment in error["msg"]


# --- parameter types ----------------------------------------------------------------------


def test_the_design_example_parses_into_typed_params(doc):
    spec = StudySpec.model_validate(doc)
    lr, depth, width_2, act = (spec.space[n] for n in ("lr", "depth", "width_2", "act"))
    assert isinstance(lr, FloatParam) and (lr.low, lr.high, lr.log) == (1e-4, 0.3, True)
    assert isinstance(depth, IntParam) and (depth.low, depth.high, depth.log) == (1, 3, False)
    assert isinstance(act, CategoricalParam) and act.choices == ["relu", "tanh", "gelu"]
    assert width_2.when == {"depth": Comparison(gte=2)}
    assert spec.early_stopping.patience == 3


def test_categorical_choices_may_mix_scalars(doc):
    doc["space"]["act"]["choices"] = ["relu", 3, 0.5, True]
    assert StudySpec.model_validate(doc).space["act"].choices == ["relu", 3, 0.5, True]


def test_int_bounds_must_be_integers(doc):
    doc["space"]["depth"]["low"] = 1.5
    assert_rejected(doc, ("space", "depth", "int", "low"), "valid integer")


def test_unknown_or_missing_type_names_the_parameter(doc):
    doc["space"]["lr"]["type"] = "double"
    assert_rejected(doc, ("space", "lr"), "'double'")
    del doc["space"]["lr"]["type"]
    assert_rejected(doc, ("space", "lr"), "'type'")


def test_contains_checks_ranges_types_and_active_set(doc):
    space = StudySpec.model_validate(doc).space
    config = {"lr": 0.01, "depth": 1, "width_1": 32, "act": "tanh"}
    assert contains(space, config)
    assert not contains(space, {**config, "width_2": 64})  # inactive parameter present
    assert contains(space, {**config, "depth": 2, "width_2": 64})
    assert not contains(space, {**config, "depth": 2})  # active parameter missing
    assert not contains(space, {**config, "lr": 0.5})
    assert not contains(space, {**config, "depth": 1.5})
    assert not contains(space, {**config, "act": "selu"})
    assert not contains(space, {**config, "lr": True})


def test_project_keeps_what_fits_another_space_and_drops_the_rest(doc):
    space = StudySpec.model_validate(doc).space  # width_2 only when depth >= 2
    trial = {"lr": 0.01, "depth": 1, "width_1": 32, "width_2": 99, "act": "tanh", "drop": 0.1}
    assert project(space, trial) == {"lr": 0.01, "depth": 1, "width_1": 32, "act": "tanh"}
    assert project(space, {**trial, "depth": 2}) == {
        **project(space, trial),
        "depth": 2,
        "width_2": 99,
    }
    assert project(space, {**trial, "depth": 2, "width_2": 300}) is None  # out of range
    del trial["width_2"]
    assert project(space, {**trial, "depth": 2}) is None  # an active parameter missing
    assert project(space, {k: v for k, v in trial.items() if k != "lr"}) is None
    assert project(space, {**trial, "lr": 0.5}) is None
    assert project(space, {**trial, "depth": 1.5}) is None
    assert project(space, {**trial, "act": "selu"}) is None
    assert project(space, {**trial, "lr": True}) is None
    assert project(space, {**trial, "lr": "0.01"}) is None


def test_project_gives_values_the_parameters_types(doc):
    doc["space"]["act"]["choices"] = [1, "1", True]
    doc["space"]["lr"] = {"type": "float", "low": 0, "high": 10}
    space = StudySpec.model_validate(doc).space
    trial = {"lr": 1, "depth": 3.0, "width_1": 32, "width_2": 64.0, "act": "1"}
    projected = project(space, trial)
    assert projected == {"lr": 1.0, "depth": 3, "width_1": 32, "width_2": 64, "act": "1"}
    assert [type(projected[n]) for n in ("lr", "depth", "width_2")] == [float, int, int]
    assert project(space, {**trial, "act": True})["act"] is True
    assert project(space, {**trial, "act": 1})["act"] == 1
    assert project(space, {**trial, "act": 1.0}) is None  # not the choice 1, nor True
    assert contains(space, projected) and contains(space, {**projected, "act": True})
    assert not contains(space, {**projected, "act": 1.0})
    doc["space"]["act"]["choices"] = [1, "relu"]
    space = StudySpec.model_validate(doc).space
    assert not contains(space, {**projected, "act": True})  # True == 1, but not the choice


# --- conditions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("relu", Comparison(eq="relu")),
        (2, Comparison(eq=2)),
        (True, Comparison(eq=True)),
        (["relu", "gelu"], Comparison(in_=["relu", "gelu"])),
        ({"in": ["relu"]}, Comparison(in_=["relu"])),
        ({"ne": "tanh"}, Comparison(ne="tanh")),
    ],
)
def test_condition_shorthands(doc, when, expected):
    doc["space"]["act"]["choices"] = ["relu", "tanh", "gelu", 2, True]  # each can hold
    doc["space"]["width_2"]["when"] = {"act": when}
    assert StudySpec.model_validate(doc).space["width_2"].when == {"act": expected}


@pytest.mark.parametrize(
    ("comparison", "passing", "failing"),
    [
        ({"eq": "relu"}, ["relu"], ["tanh"]),
        ({"ne": "relu"}, ["tanh"], ["relu"]),
        ({"in": [1, 2]}, [1, 2], [3]),
        ({"gt": 2}, [3, 2.5], [2, 1]),
        ({"gte": 2}, [2, 3], [1]),
        ({"lt": 2}, [1], [2, 3]),
        ({"lte": 2}, [2, 1], [3]),
        ({"gte": 1, "lt": 3}, [1, 2], [0, 3]),
        ({"gt": 0}, [1], ["relu", True, None]),  # order tests need numbers
    ],
)
def test_comparison_operators(comparison, passing, failing):
    test = Comparison.model_validate(comparison)
    assert all(test.holds(value) for value in passing)
    assert not any(test.holds(value) for value in failing)


def test_conditional_parameter_is_active_only_when_its_condition_holds(doc):
    space = StudySpec.model_validate(doc).space
    assert not space["width_2"].is_active({"depth": 1})
    assert space["width_2"].is_active({"depth": 2})
    assert not space["width_2"].is_active({})  # the parameter it reads is inactive
    config = {"lr": 0.1, "depth": 3, "width_2": 16}
    assert active_names(space, config) == ["lr", "depth", "width_2"]


def test_condition_chains_are_ordered_and_propagate(doc):
    doc["space"]["width_3"] = {"type": "int", "low": 1, "high": 8, "when": {"width_2": {"gt": 8}}}
    space = StudySpec.model_validate(doc).space
    order = condition_order(space)
    assert order.index("depth") < order.index("width_2") < order.index("width_3")
    assert active_names(space, {"depth": 1, "width_2": 64, "width_3": 2}) == ["depth"]


def test_empty_condition_and_unknown_operator_are_rejected(doc):
    doc["space"]["width_2"]["when"] = {"depth": {}}
    assert_rejected(doc, ("space", "width_2", "int", "when", "depth"), "at least one of")
    doc["space"]["width_2"]["when"] = {"depth": {"greater": 1}}
    assert_rejected(doc, ("space", "width_2", "int", "when", "depth", "greater"), "Extra")


def test_condition_errors_are_value_errors_with_a_location():
    space = {"a": IntParam(type="int", low=0, high=2, when={"b": Comparison(eq=1)})}
    with pytest.raises(ConditionError) as info:
        condition_order(space)
    assert isinstance(info.value, ValueError)
    assert info.value.loc == ("a", "when", "b")
    assert str(info.value) == "a: condition refers to unknown parameter 'b'"


# --- validation rules of DESIGN §3: each error names its field ---------------------------


def test_unknown_keys_are_rejected_at_every_level(doc):
    for path, loc in [
        ((), ("budgett",)),
        (("parallel",), ("parallel", "budgett")),
        (("space", "lr"), ("space", "lr", "float", "budgett")),
        (("trainer",), ("trainer", "budgett")),
    ]:
        broken = copy.deepcopy(doc)
        target = broken
        for key in path:
            target = target[key]
        target["budgett"] = 1
        assert_rejected(broken, loc, "Extra inputs are not permitted")


def test_empty_space(doc):
    doc["space"] = {}
    assert_rejected(doc, ("space",), "at least one parameter")


@pytest.mark.parametrize(("name", "tag"), [("lr", "float"), ("depth", "int")])
@pytest.mark.parametrize("delta", [0, 1])
def test_low_must_be_below_high(doc, name, tag, delta):
    doc["space"][name]["low"] = doc["space"][name]["high"] + delta
    assert_rejected(doc, ("space", name, tag), "must be below high")


@pytest.mark.parametrize(("name", "tag"), [("lr", "float"), ("width_1", "int")])
@pytest.mark.parametrize("low", [0, -1])
def test_log_scale_needs_positive_low(doc, name, tag, low):
    doc["space"][name]["low"] = low
    assert_rejected(doc, ("space", name, tag), "needs low > 0")


def test_bounds_must_be_finite(doc):
    doc["space"]["lr"].update(log=False, high=float("inf"))
    assert_rejected(doc, ("space", "lr", "high"), "finite")


def test_choices_must_be_non_empty_and_distinct(doc):
    doc["space"]["act"]["choices"] = []
    assert_rejected(doc, ("space", "act", "categorical", "choices"), "must not be empty")
    doc["space"]["act"]["choices"] = ["relu", "relu"]
    assert_rejected(doc, ("space", "act", "categorical", "choices"), "distinct")


def test_condition_on_unknown_parameter(doc):
    doc["space"]["width_2"]["when"] = {"layers": {"gte": 2}}
    assert_rejected(doc, ("space", "width_2", "when", "layers"), "unknown parameter 'layers'")


def test_condition_on_its_own_parameter(doc):
    doc["space"]["width_2"]["when"] = {"width_2": {"gte": 2}}
    assert_rejected(doc, ("space", "width_2", "when", "width_2"), "its own parameter")


def test_condition_cycles(doc):
    doc["space"]["depth"]["when"] = {"width_2": {"gte": 32}}
    assert_rejected(
        doc, ("space", "width_2", "when", "depth"), "cycle (depth -> width_2 -> depth)"
    )
    doc["space"]["depth"]["when"] = {"act": "relu"}
    doc["space"]["act"]["when"] = {"width_2": {"gte": 32}}
    [error] = errors_of(doc)
    assert error["loc"][:1] == ("space",) and error["loc"][2] == "when"
    assert "cycle" in error["msg"]


def test_parameter_names_must_be_identifiers(doc):
    doc["space"]["2nd-width"] = {"type": "int", "low": 1, "high": 2}
    assert_rejected(doc, ("space", "2nd-width"), "Python identifier")


@pytest.mark.parametrize("folds", [1, 0, -3])
def test_at_least_two_folds(doc, folds):
    doc["parallel"]["folds"] = folds
    assert_rejected(doc, ("parallel", "folds"), "greater than or equal to 2")


@pytest.mark.parametrize("name", ["bayes", "GP", ""])
def test_unknown_optimizer(doc, name):
    doc["optimizer"]["name"] = name
    assert_rejected(doc, ("optimizer", "name"), "'random', 'gp', 'evolution' or 'nas_evolution'")


@pytest.mark.parametrize("task", ["digits-mlp", "my tasks:Task", "pkg.mod:", "a{0}b"])
def test_a_malformed_task_name_says_what_a_task_name_is(doc, task):
    doc["trainer"]["task"] = task
    [error] = errors_of(doc)
    assert error["loc"] == ("trainer", "task")
    assert error["msg"] == (
        f"{task!r} is not a task name: a built-in task's name or 'package.module:attr'"
    )


@pytest.mark.parametrize(
    ("edit", "loc"),
    [
        (lambda d: d.pop("name"), ("name",)),
        (lambda d: d.pop("space"), ("space",)),
        (lambda d: d.pop("budget"), ("budget",)),
        (lambda d: d.pop("trainer"), ("trainer",)),
        (lambda d: d["trainer"].pop("task"), ("trainer", "task")),
        (lambda d: d["budget"].update(trials=0), ("budget", "trials")),
        (lambda d: d["objective"].update(direction="up"), ("objective", "direction")),
        (lambda d: d["parallel"].update(workers_per_fold=0), ("parallel", "workers_per_fold")),
        (lambda d: d["resources"].update(cpus_per_worker=0), ("resources", "cpus_per_worker")),
        (lambda d: d["early_stopping"].update(patience=0), ("early_stopping", "patience")),
    ],
)
def test_other_fields_are_checked_where_they_are(doc, edit, loc):
    edit(doc)
    assert errors_of(doc)[0]["loc"] == loc


def test_all_errors_are_reported_at_once(doc):
    doc["parallel"]["folds"] = 1
    doc["optimizer"]["name"] = "bayes"
    doc["space"]["act"]["choices"] = []
    locs = {error["loc"] for error in errors_of(doc)}
    assert locs == {
        ("parallel", "folds"),
        ("optimizer", "name"),
        ("space", "act", "categorical", "choices"),
    }


def test_warm_start_names_a_few_distinct_studies(doc):
    doc["warm_start"] = {"studies": [3, 7]}
    assert StudySpec.model_validate(doc).warm_start.studies == [3, 7]
    assert_rejected({**doc, "warm_start": {"studies": [3, 7, 3]}}, ("warm_start", "studies"), "3")
    assert_rejected({**doc, "warm_start": {"studies": []}}, ("warm_start", "studies"))
    many = list(range(1, 22))
    assert_rejected({**doc, "warm_start": {"studies": many}}, ("warm_start", "studies"), "20")
    for bad in (0, -1, 2**63, True, "3", 1.5):
        assert_rejected({**doc, "warm_start": {"studies": [bad]}}, ("warm_start", "studies", 0))
    assert_rejected({**doc, "warm_start": {"studies": [3], "trials": 5}}, ("warm_start", "trials"))
    assert_rejected({**doc, "warm_start": [3]}, ("warm_start",))


# --- the resolved spec --------------------------------------------------------------------


def test_minimal_spec_resolves_every_default():
    minimal = {
        "name": "tiny",
        "seed": 42,
        "budget": {"trials": 5},
        "trainer": {"task": "digits_mlp"},
        "space": {"x": {"type": "float", "low": 0, "high": 1}},
    }
    resolved = StudySpec.model_validate(minimal).resolved()
    assert resolved["optimizer"] == {"name": "gp", "seed": 42, "options": {}}
    assert resolved["objective"] == {"metric": "val_loss", "direction": "minimize", "use": "best"}
    assert resolved["parallel"] == {"trial_groups": 1, "folds": 5, "workers_per_fold": 1}
    assert resolved["resources"] == {"cpus_per_worker": 1.0, "gpus_per_worker": 0.0}
    assert resolved["trainer"] == {
        "task": "digits_mlp",
        "epochs": 10,
        "batch_size": 64,
        "lr_scaling": None,  # filled in at submit from the task's loop
        "warmup_epochs": None,
        "retries": 1,
        "checkpoint_every": 1,
        "fold_timeout": 3600.0,
        "precision": "32",
        "clip_grad_norm": None,
        "num_workers": 0,
        "val_batch_size": 1024,
        "options": {},
    }
    assert resolved["budget"] == {"trials": 5, "max_minutes": None, "max_consecutive_failures": 5}
    assert resolved["space"]["x"] == {
        "when": None,
        "type": "float",
        "low": 0.0,
        "high": 1.0,
        "log": False,
    }
    assert resolved["early_stopping"] is None and resolved["description"] is None
    assert resolved["racing"] == {
        "rule": "forgiving",
        "min_folds": 1,
        "stepwise": False,
        "alpha": 0.1,
    }
    assert resolved["pruning"] == {"rule": "off", "warmup_epochs": 2, "min_runs": 4, "eta": 3}


def test_optimizer_seed_defaults_to_the_study_seed_unless_given(doc):
    assert StudySpec.model_validate(doc).optimizer.seed == 0
    doc["seed"], doc["optimizer"] = 7, {"name": "random"}
    assert StudySpec.model_validate(doc).optimizer.seed == 7
    doc["optimizer"]["seed"] = 3
    assert StudySpec.model_validate(doc).optimizer.seed == 3


def test_resolved_spec_round_trips(doc):
    doc["space"]["act"]["when"] = {"depth": [1, 2]}
    spec = StudySpec.model_validate(doc)
    resolved = spec.resolved()
    assert resolved["space"]["act"]["when"]["depth"]["in"] == [1, 2]  # the alias, as written
    again = StudySpec.model_validate(resolved)
    assert again == spec and again.resolved() == resolved


def test_the_documented_example_is_a_valid_spec() -> None:
    from foldwise.spec import EXAMPLE_SPEC

    assert StudySpec.model_validate(EXAMPLE_SPEC).budget.trials == 2


def test_a_sliver_of_a_gpu_is_refused_not_rounded_away(doc):
    doc["resources"] = {"cpus_per_worker": 1, "gpus_per_worker": 0.00001}
    assert_rejected(doc, ("resources", "gpus_per_worker"), "at least 0.01")


# --- racing and pruning -------------------------------------------------------------------


def test_racing_decides_after_one_fold_or_two_for_the_t_test(doc):
    doc["racing"] = {"rule": "forgiving"}
    spec = StudySpec.model_validate(doc)
    assert spec.racing.min_folds == 1
    assert StudySpec.model_validate(spec.resolved()) == spec
    doc["racing"] = {"rule": "ttest"}
    assert StudySpec.model_validate(doc).racing.min_folds == 2
    doc["racing"] = {"rule": "posterior"}
    assert StudySpec.model_validate(doc).racing.min_folds == 2
    doc["racing"] = {"rule": "model"}
    assert StudySpec.model_validate(doc).racing.min_folds == 1
    assert StudySpec.model_validate(doc).racing.stepwise is True
    doc["racing"] = {"rule": "forgiving", "stepwise": True}
    assert StudySpec.model_validate(doc).racing.stepwise is True


def test_the_model_rule_races_one_objective_only(doc):
    doc["racing"] = {"rule": "model"}
    doc["constraints"] = [{"metric": "params", "op": "<=", "value": 1000}]
    assert_rejected(doc, ("racing", "rule"), "the model rule races one objective")
    doc["racing"] = {"rule": "forgiving", "stepwise": True}
    assert_rejected(doc, ("racing", "stepwise"), "racing.stepwise races one objective")


@pytest.mark.parametrize(
    ("racing", "folds", "fragment"),
    [
        ({"rule": "forgiving", "min_folds": 5}, 5, "below parallel.folds (5)"),
        ({"rule": "ttest", "min_folds": 1}, 5, "t-test needs min_folds >= 2"),
        ({"rule": "posterior", "min_folds": 1}, 5, "posterior rule needs min_folds >= 2"),
        ({"rule": "ttest"}, 2, "below parallel.folds (2)"),
    ],
)
def test_racing_that_could_never_prune_is_refused(doc, racing, folds, fragment):
    doc["parallel"]["folds"] = folds
    doc["racing"] = racing
    assert_rejected(doc, ("racing", "min_folds"), fragment)


@pytest.mark.parametrize(
    ("section", "edit", "loc"),
    [
        ("racing", {"rule": "anova"}, ("racing", "rule")),
        ("racing", {"rule": "ttest", "alpha": 1.0}, ("racing", "alpha")),
        ("racing", {"rule": "ttest", "alpha": 0}, ("racing", "alpha")),
        ("racing", {"rule": "forgiving", "min_folds": 0}, ("racing", "min_folds")),
        ("racing", {"rule": "forgiving", "wave": 2}, ("racing", "wave")),
        ("pruning", {"rule": "hyperband"}, ("pruning", "rule")),
        ("pruning", {"rule": "asha", "eta": 1}, ("pruning", "eta")),
        ("pruning", {"rule": "median", "warmup_epochs": 0}, ("pruning", "warmup_epochs")),
        ("pruning", {"rule": "median", "min_runs": True}, ("pruning", "min_runs")),
    ],
)
def test_racing_and_pruning_fields_are_checked_where_they_are(doc, section, edit, loc):
    doc[section] = edit
    assert_rejected(doc, loc)


@pytest.mark.parametrize(
    ("on", "when"),
    [
        ("act", "sigmoid"),  # not a choice
        ("act", {"in": []}),
        ("act", {"gt": 1}),  # an order on text
        ("depth", {"gt": 3}),  # past the range
        ("depth", {"gt": 1, "lt": 2}),  # no whole number between
        ("lr", {"eq": "a"}),
        ("lr", {"lt": 1e-5}),
    ],
)
def test_a_condition_that_can_never_hold_is_refused_at_it(doc, on: str, when: Any) -> None:
    # its parameter was never sampled: a typo that cost a whole study's budget
    doc["space"]["width_2"]["when"] = {on: when}
    with pytest.raises(ValidationError) as refused:
        StudySpec.model_validate(doc)
    [error] = refused.value.errors()
    assert error["loc"] == ("space", "width_2", "when", on)
    assert "passes this condition" in error["msg"]


@pytest.mark.parametrize(
    "when",
    [
        {"depth": {"gte": 3}},
        {"depth": {"ne": 2}},
        {"lr": {"gt": 0.05, "ne": 0.06}},
        {"act": ["relu", "x"]},
    ],
)
def test_a_condition_some_value_passes_is_kept(doc, when: dict[str, Any]) -> None:
    doc["space"]["width_2"]["when"] = when
    assert StudySpec.model_validate(doc).space["width_2"].when is not None


def test_a_stored_spec_is_read_back_without_checks_added_since(doc) -> None:
    # a study queued before conditions were checked for values that pass them still runs
    doc["space"]["width_2"]["when"] = {"act": "sigmoid"}
    with pytest.raises(ValidationError):
        StudySpec.model_validate(doc)
    stored = StudySpec.model_validate(doc, context={STORED: True})
    assert stored.space["width_2"].when["act"].eq == "sigmoid"


def test_a_long_in_list_on_an_int_is_checked_from_its_values(doc) -> None:
    doc["space"]["width_2"]["when"] = {"depth": {"in": [x + 0.5 for x in range(200)]}}
    assert_rejected(doc, ("space", "width_2", "when", "depth"))
    doc["space"]["width_2"]["when"] = {"depth": {"in": [x + 0.5 for x in range(200)] + [2]}}
    assert StudySpec.model_validate(doc).space["width_2"].when is not None


def test_a_condition_tells_true_from_1_and_false_from_0(doc) -> None:
    # Python's == says True == 1: a `when: {c: 1}` on the choice true activated its parameter
    assert not Comparison(eq=1).holds(True) and not Comparison.model_validate([0]).holds(False)
    assert Comparison(ne=1).holds(True) and Comparison(eq=True).holds(True)
    assert Comparison(eq=3.0).holds(3) and Comparison.model_validate([2, 3]).holds(3.0)
    doc["space"]["act"]["choices"] = [True, "x"]
    doc["space"]["width_2"]["when"] = {"act": 1}
    assert_rejected(doc, ("space", "width_2", "when", "act"), "passes this condition")
    doc["space"]["width_2"]["when"] = {"act": True}
    assert StudySpec.model_validate(doc).space["width_2"].is_active({"act": True})


@pytest.mark.parametrize("choices", [[1, 1.0], [0, -0.0, "x"]])
def test_choices_a_condition_cannot_tell_apart_are_refused(doc, choices: list) -> None:
    # accepted as distinct (their repr differs) while `when: {act: 1}` matched both
    doc["space"]["act"]["choices"] = choices
    assert_rejected(doc, ("space", "act", "categorical", "choices"), "is the value")
    stored = StudySpec.model_validate(doc, context={STORED: True})  # a study queued before
    assert stored.space["act"].choices == choices


def test_true_and_1_are_distinct_choices(doc) -> None:
    doc["space"]["act"]["choices"] = [True, 1, False, 0, "1"]
    doc["space"]["width_2"]["when"] = {"act": [1, True]}
    assert StudySpec.model_validate(doc).space["act"].choices == [True, 1, False, 0, "1"]


@pytest.mark.parametrize(
    "param",
    [
        {"type": "int", "low": 16, "high": 128, "log": True},
        {"type": "categorical", "choices": [16, 32, 64]},
    ],
)
def test_batch_size_and_epochs_may_be_searched(doc, param):
    doc["space"]["batch_size"] = param
    doc["space"]["epochs"] = {"type": "int", "low": 1, "high": 5}
    spec = StudySpec.model_validate(doc)
    trainer = spec.trainer.for_trial({"batch_size": 32, "epochs": 2, "lr": 0.1})
    assert (trainer.batch_size, trainer.epochs) == (32, 2)
    assert (spec.trainer.batch_size, spec.trainer.epochs) == (64, 10)  # the default stays


@pytest.mark.parametrize(
    ("name", "param"),
    [
        ("batch_size", {"type": "float", "low": 16, "high": 128}),
        ("batch_size", {"type": "int", "low": 0, "high": 8}),
        ("batch_size", {"type": "categorical", "choices": [16, "big"]}),
        ("epochs", {"type": "categorical", "choices": [1.5, 2]}),
        ("epochs", {"type": "int", "low": 1, "high": 1_000_000}),
    ],
)
def test_a_searched_trainer_setting_must_take_values_it_can(doc, name, param):
    doc["space"][name] = param
    assert_rejected(doc, ("space", name), f"sets trainer.{name} for each trial")


def test_precision_names_and_fp16_needs_a_gpu(doc):
    doc["trainer"]["precision"] = 32  # YAML's number
    assert StudySpec.model_validate(doc).trainer.precision == "32"
    doc["trainer"]["precision"] = "fp16"
    assert_rejected(doc, ("trainer", "precision"), "fp16 needs a GPU")
    doc["resources"]["gpus_per_worker"] = 1
    assert StudySpec.model_validate(doc).trainer.precision == "fp16"
    doc["trainer"]["precision"] = "fp8"
    assert errors_of(doc)[0]["loc"] == ("trainer", "precision")


# --- cross-validation and the hold-out score ---------------------------------------------


def test_cv_and_holdout_default_to_the_kind_and_to_none(doc):
    spec = StudySpec.model_validate(doc)
    assert (spec.cv.scheme, spec.cv.repeats, spec.cv.gap, spec.holdout) == (None, 1, 0, None)
    assert spec.fold_count == 5
    doc["cv"] = {"scheme": "stratified", "repeats": 3}
    doc["holdout"] = {"score": "both"}
    spec = StudySpec.model_validate(doc)
    assert spec.fold_count == 15 and spec.holdout.score == "both" and spec.holdout.epochs is None
    assert spec.resolved()["cv"] == {"scheme": "stratified", "repeats": 3, "gap": 0}


@pytest.mark.parametrize(
    ("cv", "loc", "fragment"),
    [
        ({"gap": 3}, ("cv", "gap"), "it applies to cv.scheme time_series only"),
        ({"scheme": "kfold", "gap": 3}, ("cv", "gap"), "time_series only"),
        (
            {"scheme": "time_series", "repeats": 2},
            ("cv", "repeats"),
            "cv.scheme time_series splits the same way every time: repeats must be 1",
        ),
        ({"scheme": "predefined", "repeats": 3}, ("cv", "repeats"), "repeats must be 1"),
        ({"scheme": "stratified_group", "repeats": 2}, ("cv", "repeats"), "repeats must be 1"),
        ({"repeats": 21}, ("cv", "repeats"), "parallel.folds x cv.repeats is 105 fold runs"),
        ({"scheme": "loo"}, ("cv", "scheme"), "Input should be"),
        ({"repeats": 0}, ("cv", "repeats"), "greater than or equal to 1"),
        ({"gap": -1}, ("cv", "gap"), "greater than or equal to 0"),
        ({"shuffle": False}, ("cv", "shuffle"), "Extra inputs are not permitted"),
    ],
)
def test_a_split_that_cannot_be_made_is_refused_at_its_field(doc, cv, loc, fragment):
    doc["cv"] = cv
    assert_rejected(doc, loc, fragment)


def test_racing_counts_every_repeats_folds(doc):
    doc["parallel"]["folds"] = 2
    doc["racing"] = {"rule": "forgiving", "min_folds": 2}
    assert_rejected(doc, ("racing", "min_folds"), "below parallel.folds (2)")
    doc["cv"] = {"repeats": 2}  # 4 fold runs a trial: 2 may go before racing decides
    assert StudySpec.model_validate(doc).racing.min_folds == 2


@pytest.mark.parametrize(
    ("holdout", "loc", "fragment"),
    [
        ({"score": "all"}, ("holdout", "score"), "'ensemble', 'refit' or 'both'"),
        ({"epochs": 0}, ("holdout", "epochs"), "greater than or equal to 1"),
        ({"refit": True}, ("holdout", "refit"), "Extra inputs are not permitted"),
    ],
)
def test_a_bad_holdout_is_refused_at_its_field(doc, holdout, loc, fragment):
    doc["holdout"] = holdout
    assert_rejected(doc, loc, fragment)
