"""Step Functions files imported to mean what Step Functions would run: the constructs of issue
37 that once made a false alarm or a held campaign whose runs never did their work, each on a
public file of the corpus or a minimal one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from corpus import CORPUS as SHARED

from fault_injection import load_plan
from harness import FuzzOptions, SimOptions, Simulator, fuzz
from harness.checks.checkers import check
from reference_machine import WorkflowDefinition
from reference_machine.importers import import_definition

CORPUS = SHARED / "step-functions"
NO_FAULTS = load_plan({"faults": {}})


def corpus_file(name: str) -> Path:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"no corpus at {CORPUS}")
    return path


def load(tmp_path: Path, doc: Any) -> WorkflowDefinition:
    path = tmp_path / "flow.asl.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return import_definition(path)


def test_a_pass_whose_result_is_text_ends_the_run() -> None:
    """`Report completion` replaces the data with a sentence: the run ends in success, where
    each key read as an attribute of the text once rejected the move out of the wait before it
    (1,200 steps of a timer re-fired, and 'every invariant held')."""
    definition = import_definition(corpus_file(
        "workflow-within-a-workflow-cdk__statemachines__nested-state-machine.asl.json"))
    result = Simulator(definition, SimOptions(plan=NO_FAULTS, executions=1)).run(0)
    assert result.status == "final" and result.steps < 20, result.summary()
    assert result.final["x1"].outcome == "success"
    assert not list(check(definition, result.history))


def test_a_deep_three_condition_choice_is_within_the_expression_limit(tmp_path: Path) -> None:
    """Three comparisons on a path six keys deep: once over 1,000 characters, refused."""
    path = "$.detail.requestParameters.bucket.object.meta.status"
    rules = [{"Variable": path, "StringEquals": value, "Next": "Done"}
             for value in ("new", "updated", "restored")]
    definition = load(tmp_path, {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Choices": [
            {"And": [{k: v for k, v in rule.items() if k != "Next"} for rule in rules[:2]],
             "Next": "Done"},
            {"Or": [{k: v for k, v in rule.items() if k != "Next"} for rule in rules],
             "Next": "Done"}],
                  "Default": "Done"},
        "Done": {"Type": "Succeed"}}})
    guards = [t.guard_text for t in definition.states["Route"].always if t.guard_text]
    assert guards and all(len(text) <= 1000 for text in guards)
    assert "at(context.detail, 'requestParameters', 'bucket'" in guards[0]


def test_a_whole_result_a_choice_compares_is_drawn_so_each_branch_is_taken() -> None:
    """`Generate Buy/Sell recommendation` writes its whole result to `$.recommended_type`,
    which the Choice compares to "buy" and "sell": the result is drawn as one of them, so
    runs buy and sell (every run once ended in States.NoChoiceMatched, and held)."""
    definition = import_definition(corpus_file(
        "lambda-orchestration-sam__statemachine__statemachine.asl.json"))
    output = definition.tools["BuySellFnArn"].output
    assert output is not None and "asl_result" in output["properties"]
    report = fuzz(definition, FuzzOptions(runs=150, replay_dir=None))
    assert {"Buy_Stock", "Sell_Stock", "end_success"} <= report.coverage.states
    assert report.verdict == "held", [str(gap) for gap in report.adequacy.gaps]
