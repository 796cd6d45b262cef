"""Tests of the Amazon States Language importer: each construct imported and run on the
reference machine as Step Functions would run it, located errors for what cannot be imported,
and the public corpus: its import rate, and fuzz campaigns over it without a harness error."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from corpus import CORPUS as SHARED

from reference_machine import (
    Accepted,
    Event,
    Execution,
    RunEffect,
    WorkflowDefinition,
    decide,
    new_execution,
    start_event,
)
from reference_machine.errors import DefinitionError
from reference_machine.importers import import_definition, import_document
from reference_machine.importers.asl import convert, tool_name
from reference_machine.importers.survey import survey

CORPUS = SHARED / "step-functions"
_ids = itertools.count(1)


def write(tmp_path: Path, doc: Any, name: str = "flow.asl.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def load(tmp_path: Path, doc: Any, name: str = "flow.asl.json") -> WorkflowDefinition:
    return import_definition(write(tmp_path, doc, name))


def started(definition: WorkflowDefinition, context: Mapping[str, Any] | None = None
            ) -> Accepted:
    decision = decide(definition, new_execution(definition, "r1", context=context),
                      start_event("r1"), now=0)
    assert isinstance(decision, Accepted), decision
    return decision


def given(definition: WorkflowDefinition, data: Mapping[str, Any]) -> Accepted:
    """Starts a run on the execution input `data`: given as its context, or (empty) answered
    to the synthetic state that draws an input."""
    decision = started(definition, data)
    if decision.execution.state == "asl_execution_input__draw":
        decision = answer(definition, decision.execution, "step.succeeded", data)
    return decision


def answer(definition: WorkflowDefinition, execution: Execution, kind: str,
           payload: Mapping[str, Any], *, now: int = 1) -> Accepted:
    assert execution.effect is not None
    event = Event(f"e{next(_ids)}", kind, "tool", payload, answers=execution.effect.effect_id)
    decision = decide(definition, execution, event, now=now)
    assert isinstance(decision, Accepted), decision
    return decision


def codes(definition: WorkflowDefinition) -> set[str]:
    return {w.code for w in definition.warnings}


def one_task(**task: Any) -> dict[str, Any]:
    """A Task charging a card, then Done; a Fail state for each catcher's Next."""
    finals = {c["Next"]: {"Type": "Fail", "Error": c["Next"]} for c in task.get("Catch", [])
              if isinstance(c, dict) and "Next" in c}
    return {"StartAt": "Charge", "States": {
        "Charge": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                   "Parameters": {"FunctionName": "charge", "Payload.$": "$"},
                   "Next": "Done", **task},
        "Done": {"Type": "Succeed"},
        **finals,
    }}


class TestTask:
    def test_a_task_is_a_step_of_a_declared_tool_whose_contract_is_unknown(self, tmp_path: Path
                                                                           ) -> None:
        """A Task runs a step of its Resource's tool, declared with no idempotency keys, and a
        finding says its contract is unknown."""
        definition = load(tmp_path, one_task())
        step = definition.states["Charge"].step
        assert step is not None and step.tool == "lambda.invoke.charge"
        assert not step.idempotent and step.attempts_max == 1
        assert "asl-tool-contract" in codes(definition)
        decision = started(definition, {"amount": 5})
        effect = next(c for c in decision.commands if isinstance(c, RunEffect))
        assert effect.input["Payload"]["amount"] == 5
        done = answer(definition, decision.execution, "step.succeeded", {"ok": True})
        assert done.execution.state == "Done" and done.execution.outcome == "success"

    @pytest.mark.parametrize(("field", "value"), [
        ("IntervalSeconds", 1e308), ("IntervalSeconds", "5"), ("IntervalSeconds", 0),
        ("MaxDelaySeconds", 1e308), ("BackoffRate", 1e308), ("BackoffRate", float("nan")),
        ("MaxAttempts", True)])
    def test_retry_numbers_out_of_range_are_located_errors(self, tmp_path: Path, field: str,
                                                           value: Any) -> None:
        """A retrier's numbers as ASL bounds them; past them, a located error (1e308 crashed
        the importer with an OverflowError; "5" and true were read as 1)."""
        retrier = {"ErrorEquals": ["States.ALL"], field: value}
        path = write(tmp_path, one_task(Retry=[retrier]))
        with pytest.raises(DefinitionError) as refused:
            import_definition(path)
        assert refused.value.findings[0].location == f"States.Charge.Retry[0].{field}"

    def test_a_path_deeper_than_the_bound_is_read_as_not_expressible(self, tmp_path: Path
                                                                      ) -> None:
        """5,000 segments recursed past the stack while guessing schemas; past 50 a path is
        not expressible (null, a warning), as a filter is."""
        doc = one_task()
        doc["States"]["Charge"]["Parameters"] = {"a.$": "$" + ".a" * 5000}
        definition = load(tmp_path, doc)
        assert any(w.code == "asl-path" for w in definition.warnings)

    def test_a_result_replaces_what_a_pass_wrote_below_its_path(self, tmp_path: Path) -> None:
        """A Pass writes `$.job.status`, then a Task's result replaces `$.job`: a read of
        `$.job.status` sees the result's, so the poll loop can end (it never could: the
        success branch was dead and fuzzing held on the rest)."""
        doc = {"StartAt": "Init", "States": {
            "Init": {"Type": "Pass", "Result": {"status": "PENDING"}, "ResultPath": "$.job",
                     "Next": "Poll"},
            "Poll": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:glue:getJobRun",
                     "Parameters": {"JobName": "x"}, "ResultPath": "$.job", "Next": "Check"},
            "Check": {"Type": "Choice", "Choices": [
                {"Variable": "$.job.status", "StringEquals": "DONE", "Next": "Done"}],
                "Default": "Wait"},
            "Wait": {"Type": "Wait", "Seconds": 5, "Next": "Poll"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        polled = started(definition).execution
        done = answer(definition, polled, "step.succeeded", {"status": "DONE"})
        assert done.execution.state == "Done"

    def test_a_catchers_result_path_gets_error_and_cause(self, tmp_path: Path) -> None:
        """The output a catcher writes is `{Error, Cause}`: a Choice on `$.error.Error` routes
        a timeout apart from other failures, as the file means it to."""
        doc = {"StartAt": "Pay", "States": {
            "Pay": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "pay"}, "End": True,
                    "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error",
                               "Next": "Why"}]},
            "Why": {"Type": "Choice", "Choices": [
                {"Variable": "$.error.Error", "StringEquals": "States.Timeout",
                 "Next": "Reconcile"}], "Default": "Failed"},
            "Reconcile": {"Type": "Succeed"},
            "Failed": {"Type": "Fail", "Error": "PayFailed"}}}
        definition = load(tmp_path, doc)
        for category, reached in (("timeout", "Reconcile"), ("transient", "Failed")):
            begun = started(definition)
            done = answer(definition, begun.execution, "step.failed",
                          {"category": category, "error": "it failed"})
            assert done.execution.state == reached, category

    def test_retry_becomes_the_native_policy(self, tmp_path: Path) -> None:
        """IntervalSeconds, BackoffRate, MaxAttempts, MaxDelaySeconds and JitterStrategy map
        onto the retry policy; a timeout of a tool not known idempotent is not retried."""
        doc = one_task(Retry=[{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 2,
                               "BackoffRate": 1.5, "MaxAttempts": 4, "MaxDelaySeconds": 30,
                               "JitterStrategy": "FULL"}])
        definition = load(tmp_path, doc)
        step = definition.states["Charge"].step
        assert step is not None
        assert (step.attempts_max, step.delay_initial_ms, step.delay_max_ms) == (5, 2000, 30000)
        assert (step.multiplier, step.jitter) == (1.5, 1.0)
        # not invalid_output: Step Functions checks no output, so an unread one is never
        # retried (a retry would apply the call again)
        assert step.retry_on == {"transient", "rate_limited"}
        timeout = next(w for w in definition.warnings if w.code == "asl-retry-timeout")
        assert timeout.location == "States.Charge.Retry[0].ErrorEquals"

    def test_an_output_the_file_cannot_read_ends_the_run_and_is_never_retried(
            self, tmp_path: Path) -> None:
        """A malformed output is no task error to ASL: States.ALL neither retries nor catches
        it, so the step fails to the run's failure end, its call applied once."""
        doc = one_task(Retry=[{"ErrorEquals": ["States.ALL"], "MaxAttempts": 3}],
                       Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Declined"}])
        definition = load(tmp_path, doc)
        step = definition.states["Charge"].step
        assert step is not None and "invalid_output" not in step.retry_on
        failed = definition.spec.states["Charge"].on["step.failed"]
        assert [t.target for t in failed] == ["Declined", "end_failure"]
        assert "invalid_output" not in str(failed[0].guard)
        assert failed[1].guard is None

    def test_a_side_file_declares_the_tools(self, tmp_path: Path) -> None:
        """`<file>.tools.yaml` merges native declarations over the defaults: an idempotent
        tool has its timeouts retried."""
        doc = one_task(Retry=[{"ErrorEquals": ["States.Timeout",
                                               "Lambda.TooManyRequestsException"]}])
        path = write(tmp_path, doc)
        (tmp_path / "flow.asl.json.tools.yaml").write_text(
            "lambda.invoke.charge:\n  idempotency_keys: true\n"
            "  output: {type: object, required: [id], properties: {id: {type: string}}}\n",
            encoding="utf-8")
        definition = import_definition(path)
        step = definition.states["Charge"].step
        assert step is not None and step.idempotent
        assert step.retry_on == {"timeout", "rate_limited"}
        assert "asl-tool-contract" not in codes(definition)
        assert definition.tools["lambda.invoke.charge"].output is not None

    def test_an_output_schema_is_guessed_from_what_is_read(self, tmp_path: Path) -> None:
        """The fields a Choice compares, at the place the result lands, shape the tool's
        output schema (with the values compared), so fuzzing takes both branches."""
        doc = {"StartAt": "Poll", "States": {
            "Poll": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                     "Parameters": {"FunctionName": "poll"}, "ResultSelector": {
                         "state.$": "$.Payload.job.state"}, "ResultPath": "$.poll",
                     "Next": "Done?"},
            "Done?": {"Type": "Choice", "Choices": [
                {"Variable": "$.poll.state", "StringEquals": "DONE", "Next": "Done"}],
                "Default": "Again"},
            "Again": {"Type": "Wait", "Seconds": 10, "Next": "Poll"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        output = definition.tools["lambda.invoke.poll"].output
        assert output is not None
        state = output["properties"]["Payload"]["properties"]["job"]["properties"]["state"]
        assert {"enum": ["DONE", "DONE_other"]} in state["anyOf"]
        assert "asl-output-inferred" in codes(definition)

    def test_several_retriers_are_merged_with_a_finding(self, tmp_path: Path) -> None:
        """Two retriers become one policy (the errors of both, the first's numbers)."""
        doc = one_task(Retry=[{"ErrorEquals": ["Lambda.ServiceException"], "MaxAttempts": 2},
                              {"ErrorEquals": ["Lambda.TooManyRequestsException"],
                               "MaxAttempts": 6}])
        definition = load(tmp_path, doc)
        step = definition.states["Charge"].step
        assert step is not None and step.attempts_max == 3
        assert step.retry_on == {"transient", "rate_limited"}
        merged = next(w for w in definition.warnings if w.code == "asl-retry-merged")
        assert merged.location == "States.Charge.Retry[1]"

    def test_catch_routes_failures_by_error_and_keeps_the_error(self, tmp_path: Path) -> None:
        """Catchers are guarded step.failed moves tried in order; ResultPath puts the failure
        into the context."""
        doc = one_task(Catch=[
            {"ErrorEquals": ["States.Timeout"], "Next": "TimedOut"},
            {"ErrorEquals": ["States.ALL"], "Next": "Broke", "ResultPath": "$.error"},
        ])
        definition = load(tmp_path, doc)
        first = started(definition).execution
        timed_out = answer(definition, first, "step.failed", {"category": "timeout"})
        assert timed_out.execution.state == "TimedOut"
        broke = answer(definition, started(definition).execution, "step.failed",
                       {"category": "permanent"})
        assert broke.execution.state == "Broke"
        # {Error, Cause}, kept as the importer keeps fields below the top level: flat keys
        assert broke.execution.context["error.Error"] == "States.TaskFailed"
        assert broke.execution.context["error.Cause"] is None

    def test_an_uncaught_error_fails_the_run(self, tmp_path: Path) -> None:
        """With no catcher, a failed step ends the run in a failure final state."""
        definition = load(tmp_path, one_task(Catch=[{"ErrorEquals": ["States.Timeout"],
                                                     "Next": "TimedOut"}]))
        failed = answer(definition, started(definition).execution, "step.failed",
                        {"category": "transient"})
        assert failed.execution.outcome == "failure"

    def test_result_selector_and_result_path_write_the_context(self, tmp_path: Path) -> None:
        """ResultSelector picks from the output, ResultPath places it; `$.a.b` is a flat key
        that later reads follow."""
        doc = {"StartAt": "Get", "States": {
            "Get": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                    "ResultSelector": {"size.$": "$.ContentLength"},
                    "ResultPath": "$.object.meta", "Next": "Big?"},
            "Big?": {"Type": "Choice", "Choices": [
                {"Variable": "$.object.meta.size", "NumericGreaterThan": 10, "Next": "Big"}],
                "Default": "Small"},
            "Big": {"Type": "Succeed"}, "Small": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert definition.tools["aws-sdk.s3.getObject"].repeatable
        done = answer(definition, started(definition).execution, "step.succeeded",
                      {"ContentLength": 11})
        assert done.execution.state == "Big"
        assert done.execution.context["object.meta.size"] == 11

    def test_result_path_dollar_replaces_the_data(self, tmp_path: Path) -> None:
        """The default ResultPath replaces the data: a key the output lacks is gone."""
        doc = {"StartAt": "Get", "States": {
            "Get": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                    "OutputPath": "$.Payload", "Next": "Check"},
            "Check": {"Type": "Choice", "Choices": [
                {"Variable": "$.status", "StringEquals": "ok", "Next": "Ok"},
                {"Variable": "$.old", "IsPresent": True, "Next": "Stale"}],
                "Default": "Other"},
            "Ok": {"Type": "Succeed"}, "Stale": {"Type": "Fail"}, "Other": {"Type": "Fail"}}}
        definition = load(tmp_path, doc)
        first = started(definition, {"old": 1}).execution
        done = answer(definition, first, "step.succeeded", {"Payload": {"status": "ok"}})
        assert done.execution.state == "Ok"
        other = answer(definition, started(definition, {"old": 1}).execution,
                       "step.succeeded", {"Payload": {"status": "no"}})
        assert other.execution.state == "Other"

    def test_wait_for_task_token_is_a_step_then_a_callback_wait(self, tmp_path: Path) -> None:
        """`.waitForTaskToken`: the step sends the token, then a wait state takes the declared
        callback events under TimeoutSeconds."""
        doc = {"StartAt": "Ask", "States": {
            "Ask": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                    "Parameters": {"MessageBody": {"token.$": "$$.Task.Token"}},
                    "TimeoutSeconds": 3600, "ResultPath": "$.answer", "Next": "Done",
                    "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "Late"}]},
            "Done": {"Type": "Succeed"}, "Late": {"Type": "Fail"}}}
        definition = load(tmp_path, doc)
        assert set(definition.events) >= {"Ask.task_success", "Ask.task_failure"}
        sent = answer(definition, started(definition).execution, "step.succeeded", {})
        waiting = sent.execution
        assert waiting.state == "Ask__callback"
        assert definition.states["Ask__callback"].after_ms == 3_600_000
        assert definition.states["Ask__callback"].after_target == "Late"
        event = Event("cb-1", "Ask.task_success", "system", {"approved": True})
        done = decide(definition, waiting, event, now=2)
        assert isinstance(done, Accepted) and done.execution.state == "Done"
        assert done.execution.context["answer"] == {"approved": True}

    def test_tool_names(self) -> None:
        """Tool names drop the ARN prefix and the integration suffix; lambda adds its
        function."""
        assert tool_name("arn:aws:states:::dynamodb:putItem") == "dynamodb.putItem"
        assert tool_name("arn:aws:states:::states:startExecution.sync:2") == \
            "states.startExecution"
        assert tool_name("arn:aws:lambda:us-east-1:1:function:my-fn") == "lambda.invoke.my-fn"
        assert tool_name("${Fn Arn}") == "Fn_Arn"


CHOICES: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    ({"Variable": "$.s", "StringEquals": "a"}, {"s": "a"}, True),
    ({"Variable": "$.s", "StringEquals": "a"}, {"s": "b"}, False),
    ({"Variable": "$.s", "StringLessThan": "b"}, {"s": "a"}, True),
    ({"Variable": "$.s", "StringGreaterThanEquals": "b"}, {"s": "a"}, False),
    ({"Variable": "$.s", "StringEqualsPath": "$.t"}, {"s": "a", "t": "a"}, True),
    ({"Variable": "$.n", "NumericEquals": 3}, {"n": 3}, True),
    ({"Variable": "$.n", "NumericLessThan": 3}, {"n": 2.5}, True),
    ({"Variable": "$.n", "NumericLessThanEquals": 3}, {"n": 4}, False),
    ({"Variable": "$.n", "NumericGreaterThan": 3}, {}, False),
    ({"Variable": "$.n", "NumericGreaterThanEqualsPath": "$.m"}, {"n": 3, "m": 3}, True),
    ({"Variable": "$.n", "NumericLessThanPath": "$.m"}, {"n": 3, "m": 2}, False),
    ({"Variable": "$.b", "BooleanEquals": True}, {"b": True}, True),
    ({"Variable": "$.b", "BooleanEquals": False}, {"b": True}, False),
    ({"Variable": "$.b", "BooleanEqualsPath": "$.c"}, {"b": True, "c": True}, True),
    ({"Variable": "$.t", "TimestampLessThan": "2024-01-02T00:00:00Z"},
     {"t": "2024-01-01T00:00:00Z"}, True),
    ({"Variable": "$.t", "TimestampGreaterThanPath": "$.u"},
     {"t": "2024-01-01T00:00:00Z", "u": "2024-01-02T00:00:00Z"}, False),
    ({"Variable": "$.f", "StringMatches": "log-*.txt"}, {"f": "log-2024.txt"}, True),
    ({"Variable": "$.f", "StringMatches": "log-*.txt"}, {"f": "log-2024.csv"}, False),
    ({"Variable": "$.f", "StringMatches": "a\\*b"}, {"f": "a*b"}, True),
    ({"Variable": "$.x.y", "IsPresent": True}, {"x": {"y": 0}}, True),
    ({"Variable": "$.x.y", "IsPresent": True}, {"x": {}}, False),
    ({"Variable": "$.x", "IsPresent": False}, {}, True),
    ({"Variable": "$.x", "IsNull": True}, {"x": None}, True),
    ({"Variable": "$.x", "IsBoolean": True}, {"x": False}, True),
    ({"Variable": "$.x", "IsBoolean": True}, {"x": 0}, False),
    ({"Variable": "$.x", "IsString": True}, {"x": "s"}, True),
    ({"Variable": "$.x", "IsNumeric": False}, {}, True),
    ({"Variable": "$.x", "IsTimestamp": True}, {"x": "2024-01-01T00:00:00Z"}, True),
    ({"And": [{"Variable": "$.n", "NumericGreaterThan": 1},
              {"Variable": "$.n", "NumericLessThan": 5}]}, {"n": 3}, True),
    ({"Or": [{"Variable": "$.n", "NumericEquals": 1},
             {"Variable": "$.s", "StringEquals": "a"}]}, {"n": 2, "s": "a"}, True),
    ({"Not": {"Variable": "$.s", "StringEquals": "a"}}, {"s": "a"}, False),
    ({"Variable": "$.items[1].name", "StringEquals": "b"},
     {"items": [{"name": "a"}, {"name": "b"}]}, True),
    ({"Variable": "$['odd key']", "NumericEquals": 1}, {"odd key": 1}, True),
    ({"Variable": "$.list.[0]", "NumericEquals": 1}, {"list": [1]}, True),
]


class TestChoice:
    @pytest.mark.parametrize(("rule", "context", "taken"), CHOICES,
                             ids=[json.dumps(c[0])[:60] for c in CHOICES])
    def test_a_choice_routes_as_step_functions_does(self, tmp_path: Path, rule: dict[str, Any],
                                                    context: dict[str, Any], taken: bool
                                                    ) -> None:
        """Each comparison operator decides the branch the way ASL does on that data."""
        doc = {"StartAt": "Route", "States": {
            "Route": {"Type": "Choice", "Choices": [{**rule, "Next": "Yes"}], "Default": "No"},
            "Yes": {"Type": "Succeed"}, "No": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert definition.states["Route"].kind == "choice"
        assert given(definition, context).execution.state == ("Yes" if taken else "No")

    def test_no_default_and_no_match_fails_the_run(self, tmp_path: Path) -> None:
        """States.NoChoiceMatched: the run fails."""
        doc = {"StartAt": "Route", "States": {
            "Route": {"Type": "Choice", "Choices": [
                {"Variable": "$.s", "StringEquals": "a", "Next": "Yes"}]},
            "Yes": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert started(definition, {"s": "b"}).execution.outcome == "failure"

    def test_type_tests_and_typed_comparisons_are_exact(self, tmp_path: Path) -> None:
        """IsNumeric, IsString, IsBoolean tell JSON types; a typed comparison of a value of
        another type is false, never an error that would stick the run (a text is not more
        than 5, true is no number, 0 no boolean, a list matches no pattern)."""
        doc = {"StartAt": "Route", "States": {
            "Route": {"Type": "Choice", "Choices": [
                {"And": [{"Variable": "$.v", "IsNumeric": True},
                         {"Variable": "$.v", "NumericGreaterThan": 5}], "Next": "Big"},
                {"Variable": "$.v", "StringEquals": "big", "Next": "Big"},
                {"Variable": "$.v", "IsString": True, "Next": "Text"},
                {"Variable": "$.v", "NumericEquals": 1, "Next": "One"},
                {"Variable": "$.v", "BooleanEquals": False, "Next": "No"},
                {"Variable": "$.v", "StringMatches": "ab*", "Next": "Text"},
                {"Not": {"Variable": "$.v", "NumericGreaterThan": 5}, "Next": "Small"}],
                "Default": "Other"},
            **{name: {"Type": "Succeed"} for name in
               ("Big", "Text", "One", "No", "Small", "Other")}}}
        definition = load(tmp_path, doc)
        routed = {repr(v): started(definition, {"v": v}).execution.state
                  for v in (9, "big", "abc", 1, True, False, 0, ["a", "b"], None)}
        assert routed == {"9": "Big", "'big'": "Big", "'abc'": "Text", "1": "One",
                          "True": "Small", "False": "No", "0": "Small", "['a', 'b']": "Small",
                          "None": "Small"}

    def test_jsonata_conditions_translate_when_safe(self, tmp_path: Path) -> None:
        """A JSONata condition in the safe subset routes as Step Functions would."""
        doc = {"QueryLanguage": "JSONata", "StartAt": "Route", "States": {
            "Route": {"Type": "Choice", "Choices": [
                {"Condition": "{% $states.input.job.state = 'DONE' and $states.input.n >= 2 %}",
                 "Next": "Yes"}], "Default": "No"},
            "Yes": {"Type": "Succeed"}, "No": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert started(definition, {"job": {"state": "DONE"}, "n": 2}).execution.state == "Yes"
        assert started(definition, {"job": {"state": "DONE"}, "n": 1}).execution.state == "No"

    def test_jsonata_outside_the_subset_is_refused_where_it_is(self, tmp_path: Path) -> None:
        """A function call (`$count`) is not translated: the file is refused at the
        expression, never imported with a branch silently dead."""
        doc = {"QueryLanguage": "JSONata", "StartAt": "Route", "States": {
            "Route": {"Type": "Choice", "Choices": [
                {"Condition": "{% $count($states.input.list) > 0 %}", "Next": "Yes"}],
                "Default": "No"},
            "Yes": {"Type": "Succeed"}, "No": {"Type": "Succeed"}}}
        path = tmp_path / "route.asl.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        with pytest.raises(DefinitionError) as refused:
            import_definition(path)
        (finding,) = refused.value.findings
        assert finding.location == "States.Route.Choices[0].Condition"
        assert "$count" in finding.message and "outside what is translated" in finding.message


class TestOtherStates:
    def test_wait_pass_succeed_fail(self, tmp_path: Path) -> None:
        """Wait is `after:`; Pass writes Result at ResultPath and moves on; Succeed and Fail
        are final states with their outcomes."""
        doc = {"StartAt": "Set", "States": {
            "Set": {"Type": "Pass", "Result": {"limit": 3, "tags": ["a"]},
                    "ResultPath": "$.config", "Next": "Hold"},
            "Hold": {"Type": "Wait", "Seconds": 5, "Next": "Check"},
            "Check": {"Type": "Choice", "Choices": [
                {"Variable": "$.config.limit", "NumericEquals": 3, "Next": "Ok"}],
                "Default": "Bad"},
            "Ok": {"Type": "Succeed"}, "Bad": {"Type": "Fail", "Error": "Bad"}}}
        definition = load(tmp_path, doc)
        hold = definition.states["Hold"]
        assert hold.kind == "wait" and hold.after_ms == 5000 and hold.after_target == "Check"
        assert definition.states["Ok"].outcome == "success"
        assert definition.states["Bad"].outcome == "failure"
        waiting = started(definition).execution
        assert waiting.state == "Hold"
        assert waiting.context["config.limit"] == 3 and waiting.context["config.tags"] == ["a"]

    def test_dynamic_waits_are_approximated(self, tmp_path: Path) -> None:
        """SecondsPath, Timestamp and TimestampPath are not known at load: a finding."""
        doc = {"StartAt": "Hold", "States": {
            "Hold": {"Type": "Wait", "TimestampPath": "$.at", "Next": "Done"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        found = next(w for w in definition.warnings if w.code == "asl-wait-dynamic")
        assert found.location == "States.Hold.TimestampPath"

    def test_pass_parameters_and_intrinsics(self, tmp_path: Path) -> None:
        """Parameters with paths and intrinsic functions the native expressions can say."""
        doc = {"StartAt": "Shape", "States": {
            "Shape": {"Type": "Pass", "Parameters": {
                "pair.$": "States.Array($.a, $.b)",
                "count.$": "States.ArrayLength($.list)",
                "sum.$": "States.MathAdd($.a, 1)",
                "first.$": "States.ArrayGetItem($.list, 0)",
                "label.$": "States.Format('n={}', 'x')",
                "id.$": "States.UUID()"},
                "ResultPath": "$.out", "Next": "Done"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        context = started(definition, {"a": 2, "b": 3, "list": [7, 8]}).execution.context
        assert context["out.pair"] == [2, 3] and context["out.count"] == 2
        assert context["out.sum"] == 3 and context["out.first"] == 7
        assert context["out.label"] == "n=x"
        uuid = next(w for w in definition.warnings if w.code == "asl-intrinsic")
        assert uuid.location == "States.Shape.Parameters.id.$"

    def test_parallel_is_regions_joined_with_catch(self, tmp_path: Path) -> None:
        """Each branch is a region; the join goes on, or to the catcher when one fails."""
        branch = {"StartAt": "Work", "States": {
            "Work": {"Type": "Task", "Resource": "arn:aws:states:::sns:publish", "End": True}}}
        doc = {"StartAt": "Both", "States": {
            "Both": {"Type": "Parallel", "Branches": [branch, branch], "Next": "Done",
                     "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Failed"}]},
            "Done": {"Type": "Succeed"}, "Failed": {"Type": "Fail"}}}
        definition = load(tmp_path, doc)
        assert definition.states["Both"].kind == "parallel"
        regions = [name for name, _ in definition.states["Both"].regions]
        assert len(regions) == 2
        execution = started(definition).execution
        for index in range(2):
            region = execution.regions[index]
            assert region.effect is not None
            event = Event(f"r{index}", "step.succeeded", "tool", {},
                          answers=region.effect.effect_id)
            decision = decide(definition, execution, event, now=1 + index)
            assert isinstance(decision, Accepted)
            execution = decision.execution
        assert execution.state == "Done"
        failing = started(definition).execution
        region = failing.regions[0]
        assert region.effect is not None
        event = Event("f0", "step.failed", "tool", {"category": "permanent"},
                      answers=region.effect.effect_id)
        decision = decide(definition, failing, event, now=1)
        assert isinstance(decision, Accepted) and decision.execution.state == "Failed"

    def test_map_is_a_native_map(self, tmp_path: Path) -> None:
        """ItemsPath, MaxConcurrency, ToleratedFailureCount and ResultPath map onto the map
        state; a distributed map reads as inline with a finding."""
        doc = {"StartAt": "Each", "States": {
            "Each": {"Type": "Map", "ItemsPath": "$.orders", "MaxConcurrency": 2,
                     "ToleratedFailureCount": 1, "ResultPath": "$.results",
                     "ItemProcessor": {
                         "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                         "StartAt": "Ship", "States": {
                             "Ship": {"Type": "Task", "Resource": "arn:aws:states:::sns:publish",
                                      "Parameters": {"id.$": "$.id"}, "End": True}}},
                     "Next": "Done"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        each = definition.states["Each"]
        assert each.kind == "map" and each.concurrency_max == 2
        assert each.tolerated_failures == 1 and each.results == "results"
        assert "asl-map-distributed" in codes(definition)
        execution = started(definition, {"orders": [{"id": "o1"}]}).execution
        item = execution.regions[0]
        assert item.effect is not None
        assert item.context == {"id": "o1"}
        event = Event("i0", "step.succeeded", "tool", {}, answers=item.effect.effect_id)
        decision = decide(definition, execution, event, now=1)
        assert isinstance(decision, Accepted) and decision.execution.state == "Done"

    def test_odd_state_names_become_safe_ids_with_their_label(self, tmp_path: Path) -> None:
        """A state name with spaces and punctuation is a safe id; the name is its label."""
        doc = {"StartAt": "Is it done?", "States": {
            "Is it done?": {"Type": "Pass", "Next": "All done!"},
            "All done!": {"Type": "Succeed"}}}
        imported = import_document(write(tmp_path, doc, "odd name.asl.json"))
        assert imported.data["name"] == "odd_name"
        assert set(imported.data["states"]) == {"Is_it_done", "All_done"}
        assert imported.data["states"]["Is_it_done"]["description"] == "Is it done?"

    def test_every_warning_is_located(self, tmp_path: Path) -> None:
        """No approximation is silent or unlocated."""
        doc = one_task(Retry=[{"ErrorEquals": ["Custom.Error"]}],
                       Catch=[{"ErrorEquals": ["States.ALL"], "Next": "Broke",
                               "ResultPath": "$.err"}])
        imported = import_document(write(tmp_path, doc))
        assert imported.findings
        assert all(f.location.startswith("States.") for f in imported.findings)


class TestDataAndVariables:
    def test_variables_are_assigned_and_read(self, tmp_path: Path) -> None:
        """Assign sets a variable once the state succeeds; `$name` reads it."""
        doc = {"StartAt": "Count", "States": {
            "Count": {"Type": "Pass", "Assign": {"tries.$": "$.start", "limit": 2},
                      "Next": "Check"},
            "Check": {"Type": "Choice", "Choices": [
                {"Variable": "$tries", "NumericLessThanPath": "$limit", "Next": "Low"}],
                "Default": "High"},
            "Low": {"Type": "Succeed"}, "High": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert started(definition, {"start": 1}).execution.state == "Low"
        assert started(definition, {"start": 5}).execution.state == "High"

    def test_jsonata_arguments_and_output(self, tmp_path: Path) -> None:
        """JSONata Arguments become the step input and Output the result written."""
        doc = {"QueryLanguage": "JSONata", "StartAt": "Call", "States": {
            "Call": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                     "Arguments": {"FunctionName": "f", "Payload": "{% $states.input.order %}"},
                     "Output": {"status": "{% $states.result.Payload.status %}",
                                "order": "{% $states.input.order %}"},
                     "Next": "Done"},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        start = started(definition, {"order": "o-1"})
        effect = next(c for c in start.commands if isinstance(c, RunEffect))
        assert effect.input == {"FunctionName": "f", "Payload": "o-1"}
        done = answer(definition, start.execution, "step.succeeded",
                      {"Payload": {"status": "ok"}})
        assert done.execution.context["status"] == "ok"
        assert done.execution.context["order"] == "o-1"

    def test_fields_left_out_are_findings(self, tmp_path: Path) -> None:
        """A field the importer does not model is a located warning, never a silent drop."""
        doc = one_task(Credentials={"RoleArn": "arn:aws:iam::1:role/x"})
        definition = load(tmp_path, doc)
        found = next(w for w in definition.warnings if w.code == "asl-field-ignored")
        assert found.location == "States.Charge.Credentials"

    def test_a_parallel_catches_the_error_a_branch_failed_with(self, tmp_path: Path) -> None:
        """A branch ending in Fail with an Error is caught by the catcher of that error."""
        doc = {"StartAt": "Race", "States": {
            "Race": {"Type": "Parallel", "Next": "Done", "Branches": [
                {"StartAt": "Quorum", "States": {
                    "Quorum": {"Type": "Fail", "Error": "QuorumMet"}}},
                {"StartAt": "Wait", "States": {
                    "Wait": {"Type": "Wait", "Seconds": 60, "Next": "Late"},
                    "Late": {"Type": "Fail", "Error": "RanOutOfTime"}}}],
                "Catch": [{"ErrorEquals": ["QuorumMet"], "Next": "Met"},
                          {"ErrorEquals": ["States.ALL"], "Next": "Other"}]},
            "Done": {"Type": "Succeed"}, "Met": {"Type": "Succeed"}, "Other": {"Type": "Fail"}}}
        definition = load(tmp_path, doc)
        assert started(definition).execution.state == "Met"

    def test_a_callback_failure_takes_the_catcher(self, tmp_path: Path) -> None:
        """SendTaskFailure (the failure event) goes to the catcher of task failures."""
        doc = {"StartAt": "Ask", "States": {
            "Ask": {"Type": "Task", "Resource": "arn:aws:states:::sns:publish.waitForTaskToken",
                    "HeartbeatSeconds": 600, "Next": "Done",
                    "Catch": [{"ErrorEquals": ["States.TaskFailed"], "Next": "Refused"}]},
            "Done": {"Type": "Succeed"}, "Refused": {"Type": "Fail"}}}
        definition = load(tmp_path, doc)
        assert definition.states["Ask__callback"].after_ms == 600_000
        waiting = answer(definition, started(definition).execution, "step.succeeded", {})
        refused = decide(definition, waiting.execution,
                         Event("cb", "Ask.task_failure", "system", {}), now=2)
        assert isinstance(refused, Accepted) and refused.execution.state == "Refused"


def fuzzed(definition: WorkflowDefinition, runs: int = 30) -> tuple[list[list[str]], set[str]]:
    """What a fuzz campaign took none of: the declared transitions ([state, event, target]),
    and the states it visited."""
    from harness.engines.fuzz import FuzzOptions, fuzz

    report = fuzz(definition, FuzzOptions(runs=runs, seed=0, replay_dir=None, shrink=False))
    summary = report.summary()
    assert report.verdict == "held", summary["failures"]
    return ([list(m) for m in summary["coverage"]["transitions"]["missing"]],
            set(summary["metrics"]["states"]))


ON_INPUT = {"StartAt": "Route", "States": {
    "Route": {"Type": "Choice", "Choices": [
        {"Variable": "$.kind", "StringEquals": "express", "Next": "Fast"},
        {"And": [{"Variable": "$.value", "NumericGreaterThanEquals": 20},
                 {"Variable": "$.value", "NumericLessThan": 30}], "Next": "Mid"}],
        "Default": "Slow"},
    "Fast": {"Type": "Succeed"}, "Mid": {"Type": "Succeed"}, "Slow": {"Type": "Succeed"}}}

READ_ITEMS = {"StartAt": "Each", "States": {
    "Each": {"Type": "Map", "Next": "Done",
             "ItemReader": {"Resource": "arn:aws:states:::s3:getObject",
                            "ReaderConfig": {"InputType": "CSV",
                                             "CSVHeaderLocation": "FIRST_ROW"},
                            "Parameters": {"Bucket.$": "$.bucket", "Key": "rows.csv"}},
             "ItemProcessor": {
                 "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
                 "StartAt": "Paid?", "States": {
                     "Paid?": {"Type": "Choice", "Choices": [
                         {"Variable": "$.status", "StringEquals": "paid", "Next": "Ship"}],
                         "Default": "Skip"},
                     "Ship": {"Type": "Task", "Resource": "arn:aws:states:::sns:publish",
                              "Parameters": {"id.$": "$.id"}, "End": True},
                     "Skip": {"Type": "Succeed"}}},
             "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Broke"}]},
    "Done": {"Type": "Succeed"}, "Broke": {"Type": "Fail", "Error": "Broke"}}}


class TestWhatTheFileDoesNotGive:
    def test_a_choice_on_the_execution_input_takes_each_branch_under_fuzzing(
            self, tmp_path: Path) -> None:
        """The input is drawn by a synthetic first state, shaped by what the Choice compares,
        so that the fuzzer's runs take every branch, not only the Default."""
        definition = load(tmp_path, ON_INPUT)
        assert "asl-execution-input" in codes(definition)
        finding = next(w for w in definition.warnings if w.code == "asl-execution-input")
        assert finding.location == "StartAt" and "kind, value" in finding.message
        tool = definition.tools["asl.execution_input"]
        assert tool.repeatable and tool.idempotency_keys
        assert not [w for w in definition.warnings if w.code == "asl-tool-contract"
                    and "asl.execution_input" in w.message]
        missing, _ = fuzzed(definition)
        assert not [m for m in missing if m[0] == "Route"], missing
        assert ["asl_execution_input__draw", "step.succeeded", "Route"] not in missing

    def test_a_run_started_with_a_context_takes_it_as_its_input(self, tmp_path: Path) -> None:
        """A given input is the input: no draw, the StartAt state decides on it; a drawn one
        is the data as a result replacing it would be."""
        definition = load(tmp_path, ON_INPUT)
        assert started(definition, {"value": 25}).execution.state == "Mid"
        drawing = started(definition).execution
        assert drawing.state == "asl_execution_input__draw"
        assert drawing.effect is not None
        assert answer(definition, drawing, "step.succeeded",
                      {"kind": "express"}).execution.state == "Fast"
        assert started(definition).execution.state == "asl_execution_input__draw"
        failed = answer(definition, started(definition).execution, "step.failed",
                        {"category": "permanent"})
        assert failed.execution.state == "Slow"  # the empty input

    def test_what_a_state_writes_before_it_is_read_is_not_drawn(self, tmp_path: Path) -> None:
        """A key set by an earlier state (a Pass's Result, a Task's result) is not input."""
        doc = {"StartAt": "Set", "States": {
            "Set": {"Type": "Pass", "Result": 25, "ResultPath": "$.value", "Next": "Route"},
            "Route": {**ON_INPUT["States"]["Route"],
                      "Choices": ON_INPUT["States"]["Route"]["Choices"][1:]},
            "Mid": {"Type": "Succeed"}, "Slow": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        assert "asl-execution-input" not in codes(definition)
        assert "asl.execution_input" not in definition.tools
        assert started(definition).execution.state == "Mid"

    def test_a_pattern_and_a_map_over_the_whole_result_are_guessed(self, tmp_path: Path
                                                                     ) -> None:
        """StringMatches guesses a text the pattern matches; a Map over a result that is
        its items (ItemsPath $, natively context.items) guesses the list there."""
        doc = {"StartAt": "Get", "States": {
            "Get": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                    "Parameters": {"FunctionName": "get"}, "OutputPath": "$.Payload",
                    "Next": "Each"},
            "Each": {"Type": "Map", "ItemsPath": "$", "Next": "Done", "ItemProcessor": {
                "StartAt": "Log?", "States": {
                    "Log?": {"Type": "Choice", "Choices": [
                        {"Variable": "$.file", "StringMatches": "log-*.txt", "Next": "Ok"}],
                        "Default": "Ok"},
                    "Ok": {"Type": "Succeed"}}}},
            "Done": {"Type": "Succeed"}}}
        definition = load(tmp_path, doc)
        output = definition.tools["lambda.invoke.get"].output
        assert output is not None
        items = output["properties"]["Payload"]["properties"]["items"]
        file = items["items"]["properties"]["file"]
        assert "log-x.txt" in file["anyOf"][0]["enum"]
        done = answer(definition, started(definition).execution, "step.succeeded",
                      {"Payload": {"items": [{"id": 1, "file": "log-1.txt"}]}})
        assert done.execution.state == "Done"  # the one item's flow ends at once
        assert len(done.execution.context["results_Each"]) == 1

    def test_a_map_with_an_item_reader_runs_drawn_items(self, tmp_path: Path) -> None:
        """The ItemReader's items are drawn by a synthetic state before the map (1 to 3, shaped
        by what the item flow reads), so the items' flow runs; its failure takes the Catch."""
        definition = load(tmp_path, READ_ITEMS)
        assert {"asl-item-reader", "asl-execution-input"} <= codes(definition)
        finding = next(w for w in definition.warnings if w.code == "asl-item-reader")
        assert finding.location == "States.Each.ItemReader"
        reader = definition.states["Each__ItemReader"]
        assert reader.step is not None and reader.step.tool == "asl.item_reader.Each"
        output = definition.tools["asl.item_reader.Each"].output
        assert output is not None
        listed = output["properties"]["items"]
        assert listed["minItems"] == 1 and listed["maxItems"] == 3
        assert "status" in listed["items"]["properties"]
        execution = started(definition, {"bucket": "b"}).execution
        assert execution.state == "Each__ItemReader"
        assert execution.effect is not None
        mapped = answer(definition, execution, "step.succeeded",
                        {"items": [{"id": 1, "status": "paid"}, {"id": 2, "status": "new"}]})
        assert mapped.execution.state == "Each" and len(mapped.execution.regions) == 2
        broke = answer(definition, started(definition, {"bucket": "b"}).execution,
                       "step.failed", {"category": "permanent"})
        assert broke.execution.state == "Broke"
        missing, visited = fuzzed(definition)
        # an item's first eventless move is not counted as a transition taken: its targets are
        assert {"Each__Ship", "Each__Skip", "Each__success", "Done", "Broke"} <= visited
        assert ["Each__Ship", "step.succeeded", "Each__success"] not in missing
        assert ["Each__ItemReader", "step.succeeded", "Each"] not in missing


class TestSurvey:
    def test_a_survey_tells_imported_and_refused_files(self, tmp_path: Path) -> None:
        """Per file an outcome, approximations tallied by code, refusals with a reason."""
        write(tmp_path, one_task(Retry=[{"ErrorEquals": ["States.ALL"], "MaxAttempts": 1}]),
              "good.asl.json")
        write(tmp_path, {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}}},
              "bad.asl.json")
        (tmp_path / "notes.txt").write_text("not a definition", encoding="utf-8")
        result = survey([tmp_path])
        assert [Path(f.path).name for f in result.files] == ["bad.asl.json", "good.asl.json"]
        assert len(result.imported) == 1 and result.rate == 0.5
        assert result.findings_by_code()["asl-tool-contract"] == 1
        table = result.markdown()
        assert "Imported 1 of 2 files (50%)." in table
        assert "| `bad.asl.json` | States.A.Next:" in table
        assert "| `asl-retry-timeout` | 1 | 1 |" in table


class TestBadInput:
    def test_a_retrier_without_error_equals(self, tmp_path: Path) -> None:
        """The error names the retrier's ErrorEquals."""
        with pytest.raises(DefinitionError, match=r"ErrorEquals") as info:
            load(tmp_path, one_task(Retry=[{"MaxAttempts": 2}]))
        assert info.value.findings[0].location == "States.Charge.Retry[0].ErrorEquals"

    def test_a_next_to_a_missing_state(self, tmp_path: Path) -> None:
        """The error names the Next at fault."""
        doc = {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Nowhere"}}}
        with pytest.raises(DefinitionError, match=r"Nowhere") as info:
            load(tmp_path, doc)
        assert info.value.findings[0].location == "States.A.Next"

    def test_not_a_mapping(self) -> None:
        """A document that is not a mapping is refused."""
        with pytest.raises(DefinitionError, match=r"mapping"):
            convert(["not", "a", "machine"], {}, "x.asl.json")

    def test_no_start_at(self) -> None:
        """StartAt is required, and located."""
        with pytest.raises(DefinitionError, match=r"StartAt") as info:
            convert({"States": {"A": {"Type": "Succeed"}}}, {}, "x.asl.json")
        assert info.value.findings[0].location == "StartAt"

    def test_an_unknown_state_type(self) -> None:
        """A Type outside ASL's is located."""
        with pytest.raises(DefinitionError, match=r"state type") as info:
            convert({"StartAt": "A", "States": {"A": {"Type": "Sleep"}}}, {}, "x.asl.json")
        assert info.value.findings[0].location == "States.A.Type"

    def test_a_comparison_of_the_wrong_type(self) -> None:
        """NumericEquals on a string is an error at the operator."""
        doc = {"StartAt": "R", "States": {
            "R": {"Type": "Choice", "Choices": [
                {"Variable": "$.n", "NumericEquals": "3", "Next": "Y"}]},
            "Y": {"Type": "Succeed"}}}
        with pytest.raises(DefinitionError, match=r"Numeric") as info:
            convert(doc, {}, "x.asl.json")
        assert info.value.findings[0].location == "States.R.Choices[0].NumericEquals"


    def test_an_error_in_yaml_has_its_line(self, tmp_path: Path) -> None:
        """A YAML document tells lines: the error carries the line of its location."""
        path = tmp_path / "flow.asl.yaml"
        path.write_text("StartAt: A\nStates:\n  A:\n    Type: Task\n"
                        "    Resource: arn:aws:states:::sns:publish\n"
                        "    Retry:\n      - MaxAttempts: 2\n    End: true\n", encoding="utf-8")
        with pytest.raises(DefinitionError, match=r"line 7: States\.A\.Retry\[0\]"):
            import_document(path)

    @pytest.mark.parametrize(("states", "location"), [
        ({"A": {"Type": "Choice", "Choices": [7]}}, "States.A.Choices[0]"),
        ({"A": {"Type": "Choice", "Choices": [{"And": 3, "Next": "A"}]}},
         "States.A.Choices[0].And"),
        ({"A": {"Type": "Task", "Resource": "x", "Retry": {}, "End": True}}, "States.A.Retry"),
        ({"A": {"Type": "Task", "Resource": "x", "End": True,
                "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": "3"}]}},
         "States.A.Retry[0].MaxAttempts"),
        ({"A": {"Type": "Parallel", "Branches": "x", "End": True}}, "States.A.Branches"),
        ({"A": {"Type": "Map", "End": True}}, "States.A.ItemProcessor"),
        ({"A": {"Type": "Task", "End": True}}, "States.A.Resource"),
        ({"A": {"Type": "Task", "Resource": "x", "End": True,
                "Catch": [{"ErrorEquals": ["States.ALL"]}]}}, "States.A.Catch[0].Next"),
        ({"A": "Succeed"}, "States.A"),
    ])
    def test_malformed_states_are_located_errors(self, states: dict[str, Any], location: str
                                                 ) -> None:
        """What is malformed is refused where it is, never with a crash."""
        with pytest.raises(DefinitionError, match=r"asl-") as info:
            convert({"StartAt": "A", "States": states}, {}, "x.asl.json")
        assert info.value.findings[0].location == location


needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(),
                                  reason=f"the Step Functions corpus is not at {CORPUS}")


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.iterdir() if p.name.endswith((".asl.json", ".asl.yaml")))


@needs_corpus
class TestCorpus:
    def test_at_least_nine_in_ten_import(self) -> None:
        """The survey of the public corpus imports at least 90% of its files."""
        result = survey([CORPUS])
        assert len(result.files) == len(corpus_files()) >= 80
        assert result.rate >= 0.9, result.markdown()
        table = result.markdown()
        assert f"Imported {len(result.imported)} of {len(result.files)}" in table
        assert "asl-tool-contract" in table

    def test_a_sample_fuzzes_without_a_harness_error(self) -> None:
        """Five corpus files, ten runs each with every fault kind: a verdict, no exception."""
        from harness.engines.fuzz import FuzzOptions, fuzz

        for path in corpus_files()[::17][:5]:
            report = fuzz(import_definition(path), FuzzOptions(runs=10, seed=0, replay_dir=None,
                                                               shrink=False))
            assert report.verdict in ("held", "violated", "vacuous", "untested"), path.name

    @pytest.mark.slow
    def test_every_file_fuzzes_without_a_harness_error(self) -> None:
        """Every imported corpus file, 50 runs with every fault kind: a verdict each."""
        from harness.engines.fuzz import FuzzOptions, fuzz

        verdicts = {}
        for path in corpus_files():
            try:
                definition = import_definition(path)
            except DefinitionError:
                continue
            report = fuzz(definition, FuzzOptions(runs=50, seed=0, replay_dir=None))
            verdicts[path.name] = report.verdict
        assert set(verdicts.values()) <= {"held", "violated", "vacuous", "untested"}, verdicts
