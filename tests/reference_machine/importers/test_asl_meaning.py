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
from harness.checks.invariants import check
from harness.sim.history import Committed
from reference_machine import WorkflowDefinition
from reference_machine.errors import DefinitionError
from reference_machine.importers import import_definition, import_document

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


def _ran(definition: WorkflowDefinition) -> Any:
    result = Simulator(definition, SimOptions(plan=NO_FAULTS, executions=1)).run(0)
    assert result.status == "final", result.summary()
    assert not list(check(definition, result.history))
    return result


def test_an_array_range_is_the_list_a_map_goes_over(tmp_path: Path) -> None:
    """`States.ArrayRange(1, 5, 2)` is [1, 3, 5]: the map runs three items (the range was once
    sent as its text, a map over a text: a false no_stuck_execution at start)."""
    definition = load(tmp_path, {"StartAt": "Numbers", "States": {
        "Numbers": {"Type": "Pass", "Parameters": {"items.$": "States.ArrayRange(1, 5, 2)"},
                    "Next": "Each"},
        "Each": {"Type": "Map", "ItemsPath": "$.items", "ResultPath": "$.done",
                 "ItemProcessor": {"StartAt": "Double", "States": {
                     "Double": {"Type": "Pass", "End": True}}},
                 "Next": "Check"},
        "Check": {"Type": "Choice", "Choices": [
            {"Variable": "$.items[2]", "NumericEquals": 5, "Next": "Done"}],
            "Default": "Wrong"},
        "Done": {"Type": "Succeed"},
        "Wrong": {"Type": "Fail"}}})
    result = _ran(definition)
    assert result.final["x1"].outcome == "success"
    (moved,) = [r for r in result.history if type(r) is Committed and r.moved]
    assert [target for _, _, target in moved.inner].count("Each__success") == 3


def test_format_split_and_json_intrinsics_compute_what_step_functions_does(
        tmp_path: Path) -> None:
    parameters = {
        "greeting.$": "States.Format('order {} of {}', $.order.id, $.order.who)",
        "parts.$": "States.StringSplit($.order.tags, ',;')",
        "text.$": "States.JsonToString($.order)",
        "merged.$": "States.JsonMerge($.order, $.extra, false)",
    }
    definition = load(tmp_path, {"StartAt": "Shape", "States": {
        "Shape": {"Type": "Pass", "Parameters": parameters, "Next": "Back"},
        "Back": {"Type": "Pass", "Parameters": {
            "again.$": "States.StringToJson($.text)", "greeting.$": "$.greeting",
            "parts.$": "$.parts", "merged.$": "$.merged"}, "Next": "Check"},
        "Check": {"Type": "Choice", "Choices": [{"And": [
            {"Variable": "$.greeting", "StringEquals": "order 7 of ada"},
            {"Variable": "$.parts[2]", "StringEquals": "c"},
            {"Variable": "$.again.id", "NumericEquals": 7},
            {"Variable": "$.merged.who", "StringEquals": "bob"}], "Next": "Done"}],
            "Default": "Wrong"},
        "Done": {"Type": "Succeed"},
        "Wrong": {"Type": "Fail"}}})
    context = {"order": {"id": 7, "who": "ada", "tags": "a,b;c"}, "extra": {"who": "bob"}}
    result = Simulator(definition, SimOptions(plan=NO_FAULTS, executions=1,
                                              context=context)).run(0)
    assert result.final["x1"].outcome == "success", result.summary()


@pytest.mark.parametrize(("call", "told"), [
    ("States.Hash($.a, 'SHA-1')", "States.Hash with 2 argument(s) is not translated"),
    ("States.MathRandom(1, 9)", "States.MathRandom with 2 argument(s) is not translated"),
    ("States.Format('x'", "is not an intrinsic function call Step Functions would take"),
])
def test_an_intrinsic_not_translated_refuses_the_file_where_it_stands(
        tmp_path: Path, call: str, told: str) -> None:
    with pytest.raises(DefinitionError, match=r"States\.Shape\.Parameters\.v\.\$: .*"
                                              + told.replace("(", r"\(").replace(")", r"\)")):
        load(tmp_path, {"StartAt": "Shape", "States": {
            "Shape": {"Type": "Pass", "Parameters": {"v.$": call}, "End": True}}})


def test_a_hyphenated_input_key_is_drawn_so_its_choice_is_taken(tmp_path: Path) -> None:
    """`$.detail-type`, on every EventBridge event: the drawn input once had only `detail`,
    and every run fell to the default."""
    definition = load(tmp_path, {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Choices": [
            {"Variable": "$.detail-type", "StringEquals": "Object Created", "Next": "Done"}],
            "Default": "Other"},
        "Done": {"Type": "Succeed"},
        "Other": {"Type": "Fail"}}})
    drawn = definition.tools["asl.execution_input"].output
    assert drawn is not None and "detail-type" in drawn["properties"]
    report = fuzz(definition, FuzzOptions(runs=40, replay_dir=None))
    assert {"Done", "Other"} <= report.coverage.states


def test_data_rooted_in_an_array_reads_the_merged_branches_with_a_warning(
        tmp_path: Path) -> None:
    """After a Parallel, `$[1].code` reads the second branch's output in Step Functions;
    natively the branches' data is merged, so it reads `$.code`, said where it stands (it once
    read the context's key 0: null, unwarned)."""
    path = tmp_path / "flow.asl.json"
    path.write_text(json.dumps({"StartAt": "Both", "States": {
        "Both": {"Type": "Parallel", "Next": "Route", "Branches": [
            {"StartAt": "A", "States": {"A": {"Type": "Pass", "End": True}}},
            {"StartAt": "B", "States": {"B": {"Type": "Pass", "Result": {"code": 7},
                                              "ResultPath": "$.code", "End": True}}}]},
        "Route": {"Type": "Choice", "Choices": [
            {"Variable": "$[1].code", "NumericEquals": 7, "Next": "Done"}],
            "Default": "Other"},
        "Done": {"Type": "Succeed"},
        "Other": {"Type": "Fail"}}}), encoding="utf-8")
    imported = import_document(path)
    (told,) = [f for f in imported.findings if "reads an item of data that is an array" in
               f.message]
    assert told.location == "States.Route.Choices[0].Variable" and "read as $.code" in told.message


def test_moves_of_branches_entered_and_finished_in_one_step_are_covered(
        tmp_path: Path) -> None:
    """A Parallel of a Choice and a Pass: each branch runs to its end inside the step that
    enters it, and coverage once saw only the branches' landings (transitions 4 of 11)."""
    definition = load(tmp_path, {"StartAt": "Both", "States": {
        "Both": {"Type": "Parallel", "Next": "Done", "Branches": [
            {"StartAt": "Pick", "States": {
                "Pick": {"Type": "Choice", "Default": "Small", "Choices": [
                    {"Variable": "$.n", "NumericGreaterThan": 5, "Next": "Big"}]},
                "Big": {"Type": "Pass", "End": True},
                "Small": {"Type": "Pass", "End": True}}},
            {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}]},
        "Done": {"Type": "Succeed"}}})
    report = fuzz(definition, FuzzOptions(runs=50, replay_dir=None))
    assert {("Both__branch1__Pick", "always", "Both__branch1__Big"),
            ("Both__branch1__Pick", "always", "Both__branch1__Small"),
            ("Both__branch1__Big", "always", "Both__branch1__success"),
            ("Both__branch2__P", "always", "Both__branch2__success")
            } <= report.coverage.transitions
    (moved,) = [r for r in Simulator(definition, SimOptions(plan=NO_FAULTS, executions=1)
                                     ).run(0).history if type(r) is Committed and r.inner]
    assert ("Both__branch1__Pick", "Both__branch1__Big") in moved.inner_via or (
        "Both__branch1__Pick", "Both__branch1__Small") in moved.inner_via


def test_a_loop_over_a_list_it_pops_ends_when_the_list_runs_out() -> None:
    """`transfer-data-records` seeds a list (`ResultPath: $.List`), compares `$.List[0]` to
    DONE and pops with `$.List[1:]`: the slice was read as null and a comparison's negation of
    a missing value held, so every run looped to its bound. The list is drawn (its head the
    rule's value or another), sliced, and an emptied list matches no rule, as Step Functions
    fails the run there: every state is reached, and the file holds."""
    definition = import_definition(corpus_file(
        "transfer-data-records__statemachine__statemachine.asl.json"))
    report = fuzz(definition, FuzzOptions(runs=100, replay_dir=None))
    assert report.verdict == "held", [str(gap) for gap in report.adequacy.gaps]
    assert {"Read_Next_Message_from_DynamoDB", "Pop_Element_from_List", "Succeed"
            } <= report.coverage.states


def test_findings_about_the_source_are_reported_with_the_campaign(tmp_path: Path) -> None:
    """A callback that can wait forever, a Choice a run can fall through, a flow that can only
    fail: what matters to the file's users is said with the verdict, located in ASL terms."""
    definition = load(tmp_path, {"StartAt": "Ask", "States": {
        "Ask": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": "q", "MessageBody": {"token.$": "$$.Task.Token"}},
                "Next": "Route"},
        "Route": {"Type": "Choice", "Choices": [
            {"Variable": "$.ok", "BooleanEquals": False, "Next": "Refused"}]},
        "Refused": {"Type": "Fail", "Error": "Refused"}}})
    report = fuzz(definition, FuzzOptions(runs=20, replay_dir=None))
    told = [note for note in report.notes if note.startswith("about the source: ")]
    assert len(told) == 3, report.notes
    assert any("States.Ask: a callback task with no TimeoutSeconds" in n for n in told)
    assert any("States.Route: a Choice with no Default" in n for n in told)
    assert any("StartAt: no path from StartAt reaches a Succeed" in n for n in told)
    assert report.summary()["notes"] == list(report.notes)


def test_a_sound_file_has_no_finding_about_its_source(tmp_path: Path) -> None:
    """The control: a Default, a timeout, a way to succeed."""
    definition = load(tmp_path, {"StartAt": "Ask", "States": {
        "Ask": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "TimeoutSeconds": 3600,
                "Parameters": {"QueueUrl": "q", "MessageBody": {"token.$": "$$.Task.Token"}},
                "Next": "Route"},
        "Route": {"Type": "Choice", "Default": "Done", "Choices": [
            {"Variable": "$.ok", "BooleanEquals": False, "Next": "Refused"}]},
        "Done": {"Type": "Succeed"},
        "Refused": {"Type": "Fail", "Error": "Refused"}}})
    report = fuzz(definition, FuzzOptions(runs=20, replay_dir=None))
    assert not [note for note in report.notes if note.startswith("about the source: ")]


def test_an_array_range_of_a_missing_bound_is_null_not_a_stuck_run(tmp_path: Path) -> None:
    """`States.ArrayRange(1, $.n, 1)` where the drawn input's `n` is not a whole number: null,
    as the importer's reads are (it once raised at the move: a false no_stuck_execution)."""
    definition = load(tmp_path, {"StartAt": "Numbers", "States": {
        "Numbers": {"Type": "Pass", "Parameters": {"items.$": "States.ArrayRange(1, $.n, 1)"},
                    "Next": "Done"},
        "Done": {"Type": "Succeed"}}})
    report = fuzz(definition, FuzzOptions(runs=30, replay_dir=None))
    assert report.verdict == "held", [f.rule for f in report.failures]


def test_a_not_of_an_and_guarded_by_is_present_holds_when_the_value_is_missing(
        tmp_path: Path) -> None:
    """`Not: {And: [IsPresent $.x, $.x == "a"]}` is true where `x` is missing: the And stops
    at its presence test; the presence the Not asks for leaves out what the And tests."""
    definition = load(tmp_path, {"StartAt": "Route", "States": {
        "Route": {"Type": "Choice", "Default": "Other", "Choices": [
            {"Not": {"And": [{"Variable": "$.x", "IsPresent": True},
                             {"Variable": "$.x", "StringEquals": "a"}]}, "Next": "Taken"}]},
        "Taken": {"Type": "Succeed"}, "Other": {"Type": "Succeed"}}})
    routed = {repr(x): Simulator(definition, SimOptions(
        plan=NO_FAULTS, executions=1, context={"x": x} if x is not None else {"y": 1})
    ).run(0).final["x1"].state for x in ("a", "b", None)}
    assert routed == {"'a'": "Other", "'b'": "Taken", "None": "Taken"}


def test_a_callback_timed_at_run_time_is_not_unbounded(tmp_path: Path) -> None:
    definition = load(tmp_path, {"StartAt": "Ask", "States": {
        "Ask": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "TimeoutSecondsPath": "$.wait",
                "Parameters": {"QueueUrl": "q", "MessageBody": {"token.$": "$$.Task.Token"}},
                "End": True}}})
    assert not [f for f in definition.warnings if f.code == "asl-callback-unbounded"]
