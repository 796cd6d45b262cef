"""Tests of the XState v5 importer: the docs' plain-config examples import, lint clean of
errors, decide as XState would on the reference machine and fuzz without a harness error; bad
configs are refused (or approximated) with located findings."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from charts import Driver

from harness.engines.fuzz import FuzzOptions, fuzz
from reference_machine import (
    TIMER_FIRED,
    Accepted,
    Event,
    Finding,
    Rejected,
    Severity,
    TimerPurpose,
    WorkflowDefinition,
    check_spec,
    load_definition,
    load_spec,
)
from reference_machine.errors import DefinitionError
from reference_machine.importers import import_definition, lint_imported, to_yaml
from reference_machine.importers.xstate import EVENT_SOURCES, convert

# -- the examples: XState v5 docs configs with no inline JavaScript ---------------------------
# Each is written from memory of the page named above it (stately.ai/docs), faithfully except
# where noted: inline functions (guards, assign callbacks, actor logic) are JavaScript, so a
# JSON config names them, and the test registers Python functions under those names.

# stately.ai/docs/state-machines-and-statecharts (the toggle of the quick start)
TOGGLE: dict[str, Any] = {
    "id": "toggle",
    "initial": "Inactive",
    "states": {
        "Inactive": {"on": {"toggle": "Active"}},
        "Active": {"on": {"toggle": "Inactive"}},
    },
}

# stately.ai/docs/delayed-transitions (the traffic light)
TRAFFIC_LIGHT: dict[str, Any] = {
    "id": "trafficLight",
    "initial": "green",
    "states": {
        "green": {"after": {"5000": {"target": "yellow"}}},
        "yellow": {"after": {"2000": {"target": "red"}}},
        "red": {"after": {"10000": {"target": "green"}}},
    },
}

# stately.ai/docs/invoke (fetching a user; `input` as a literal, the assign callbacks named,
# and `success` final as in the docs' fetch examples, so the run ends there)
FETCH: dict[str, Any] = {
    "id": "user",
    "initial": "idle",
    "context": {"userId": 42, "user": None, "error": None},
    "states": {
        "idle": {"on": {"FETCH": {"target": "loading"}}},
        "loading": {
            "invoke": {
                "id": "getUser",
                "src": "fetchUser",
                "input": {"userId": 42},
                "onDone": {"target": "success", "actions": "assignUser"},
                "onError": {"target": "failure", "actions": "assignError"},
            },
        },
        "success": {"type": "final"},
        "failure": {"on": {"RETRY": {"target": "loading"}}},
    },
}

# stately.ai/docs/history-states (the checkout: paying by card or PayPal, then the address,
# and back to the payment method chosen; the switching events are added so that history has
# something to remember)
CHECKOUT: dict[str, Any] = {
    "id": "checkout",
    "initial": "payment",
    "states": {
        "payment": {
            "initial": "card",
            "states": {
                "card": {"on": {"paypal": "paypal"}},
                "paypal": {"on": {"card": "card"}},
                "hist": {"type": "history"},
            },
            "on": {"next": "address"},
        },
        "address": {"on": {"back": {"target": "payment.hist"}}},
    },
}

# stately.ai/docs/parallel-states (uploading and downloading a file at once; `success` final
# so that the machine is done once both are)
FILE: dict[str, Any] = {
    "id": "file",
    "type": "parallel",
    "states": {
        "upload": {
            "initial": "idle",
            "states": {
                "idle": {"on": {"INIT_UPLOAD": {"target": "pending"}}},
                "pending": {"on": {"UPLOAD_COMPLETE": {"target": "success"}}},
                "success": {"type": "final"},
            },
        },
        "download": {
            "initial": "idle",
            "states": {
                "idle": {"on": {"INIT_DOWNLOAD": {"target": "pending"}}},
                "pending": {"on": {"DOWNLOAD_COMPLETE": {"target": "success"}}},
                "success": {"type": "final"},
            },
        },
    },
}

# xstate.js.org/docs/guides/parallel.html (the v4 docs' word processor; v5's parallel-states
# page shows the same kind of machine): four toggles that never end
WORD: dict[str, Any] = {
    "id": "word",
    "type": "parallel",
    "states": {
        "bold": {"initial": "off", "states": {
            "on": {"on": {"TOGGLE_BOLD": "off"}}, "off": {"on": {"TOGGLE_BOLD": "on"}}}},
        "underline": {"initial": "off", "states": {
            "on": {"on": {"TOGGLE_UNDERLINE": "off"}},
            "off": {"on": {"TOGGLE_UNDERLINE": "on"}}}},
        "italics": {"initial": "off", "states": {
            "on": {"on": {"TOGGLE_ITALICS": "off"}}, "off": {"on": {"TOGGLE_ITALICS": "on"}}}},
        "list": {"initial": "none", "states": {
            "none": {"on": {"BULLETS": "bullets", "NUMBERS": "numbers"}},
            "bullets": {"on": {"NONE": "none", "NUMBERS": "numbers"}},
            "numbers": {"on": {"BULLETS": "bullets", "NONE": "none"}}}},
    },
}

# stately.ai/docs/guards and the docs' feedback machine (the guard and the assign named)
FEEDBACK: dict[str, Any] = {
    "id": "feedback",
    "initial": "prompt",
    "context": {"feedback": ""},
    "states": {
        "prompt": {
            "on": {
                "feedback.good": {"target": "thanks"},
                "feedback.bad": {"target": "form"},
            },
        },
        "form": {
            "on": {
                "feedback.update": {"actions": {"type": "updateFeedback"}},
                "submit": [
                    {"guard": "feedbackValid", "target": "thanks"},
                    {"actions": [{"type": "xstate.assign",
                                  "assignment": {"feedback": ""}}]},
                ],
                "back": {"target": "prompt"},
            },
        },
        "thanks": {},
        "closed": {"type": "final"},
    },
    "on": {"feedback.close": {"target": ".closed"}},
}

# stately.ai/docs/eventless-transitions (the game: won once enough points are awarded)
GAME: dict[str, Any] = {
    "id": "game",
    "initial": "playing",
    "context": {"points": 0},
    "states": {
        "playing": {
            "always": {"guard": "didPlayerWin", "target": "won"},
            "on": {"award.points": {"actions": "awardPoints"}},
        },
        "won": {"type": "final"},
    },
}


def _payload(event: Any) -> Mapping[str, Any]:
    payload = getattr(event, "payload", None)
    return payload if isinstance(payload, Mapping) else {}


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "assignUser": lambda context, event: {"user": _payload(event).get("name", "someone")},
    "assignError": lambda context, event: {"error": _payload(event).get("category")},
    "updateFeedback": lambda context, event: {
        "feedback": str(_payload(event).get("feedback", ""))},
    "feedbackValid": lambda context, event: len(context["feedback"]) > 0,
    "didPlayerWin": lambda context, event: context["points"] > 99,
    "awardPoints": lambda context, event: {"points": context["points"] + 50},
}

FUZZ = FuzzOptions(runs=20, seed=0, replay_dir=None, isolate=False)
#: Verdicts other than `held` (none: an actor started again by RETRY is a new call)
VERDICTS: dict[str, tuple[str, tuple[str, ...]]] = {}

EXAMPLES = {"toggle": TOGGLE, "traffic_light": TRAFFIC_LIGHT, "fetch": FETCH,
            "checkout": CHECKOUT, "file": FILE, "word": WORD, "feedback": FEEDBACK,
            "game": GAME}


def imported(config: Mapping[str, Any], name: str = "machine.xstate.json") -> Any:
    return convert(copy.deepcopy(dict(config)), {}, name)


def definition(config: Mapping[str, Any]) -> WorkflowDefinition:
    return load_definition(imported(config).data, functions=FUNCTIONS)


def codes(findings: Any) -> list[str]:
    return [f.code for f in findings]


def at(findings: Any, code: str) -> list[str]:
    return [f.location for f in findings if f.code == code]


def fire(driver: Driver, now: int | None = None) -> Any:
    """Fires the run's one wait timer, at its time."""
    (timer,) = [t for t in driver.ex.timers if t.purpose == TimerPurpose.WAIT_TIMEOUT]
    driver.serial += 1
    return driver.send(Event(f"ev{driver.serial}", TIMER_FIRED, "timer", {}, timer.id),
                       timer.fire_at if now is None else now)


# -- every example ---------------------------------------------------------------------------

class TestExamples:
    @pytest.mark.parametrize("name", sorted(EXAMPLES))
    def test_lints_clean_of_errors(self, name: str) -> None:
        """Each example imports to a definition the native checks find no error in."""
        spec, _, _ = load_spec(imported(EXAMPLES[name]).data)
        errors = [f for f in check_spec(spec, functions=FUNCTIONS)
                  if f.severity is Severity.ERROR]
        assert errors == []

    @pytest.mark.parametrize("name", sorted(EXAMPLES))
    def test_fuzzes_without_harness_error(self, name: str) -> None:
        """Each example fuzzes to a verdict, never an exception; all hold but the fetch."""
        report = fuzz(definition(EXAMPLES[name]), FUZZ)
        expected = VERDICTS.get(name, ("held", ()))
        assert (report.verdict, tuple(f.rule for f in report.failures)) == expected

    def test_an_actor_started_again_is_no_duplicate_effect(self) -> None:
        """The invoke's tool is one action per call: RETRY entering `loading` again starts a
        new actor (a new key), which the same tool counted by its input would call a
        duplicate effect."""
        data = imported(FETCH).data
        assert data["tools"]["fetchUser"]["action"] == "call"
        assert fuzz(load_definition(data, functions=FUNCTIONS), FUZZ).verdict == "held"
        data["tools"]["fetchUser"]["action"] = "input"
        report = fuzz(load_definition(data, functions=FUNCTIONS), FUZZ)
        assert [f.rule for f in report.failures][:1] == ["no_duplicate_effect"]

    @pytest.mark.parametrize("name", sorted(EXAMPLES))
    def test_native_yaml_loads_back(self, name: str) -> None:
        """The native YAML `fsmharness import` writes loads as the same definition data."""
        result = imported(EXAMPLES[name])
        text = to_yaml(result)
        assert text.startswith("# imported from machine.xstate.json (xstate)")
        spec, _, _ = load_spec(text)
        assert spec.name == result.data["name"]

    def test_events_are_declared_with_the_default_sources(self) -> None:
        """Every event of `on` is declared, sent by a human or the system."""
        data = imported(FEEDBACK).data
        assert set(data["events"]) == {"feedback.good", "feedback.bad", "feedback.update",
                                       "submit", "back", "feedback.close"}
        assert all(e["sources"] == list(EVENT_SOURCES) for e in data["events"].values())


class TestToggle:
    def test_toggles_for_ever(self) -> None:
        """The toggle has no final state: reactive, and each toggle flips it."""
        data = imported(TOGGLE).data
        assert data["reactive"] is True
        driver = Driver(definition(TOGGLE))
        driver.start()
        assert driver.ex.state == "Inactive"
        for expected in ("Active", "Inactive", "Active"):
            assert isinstance(driver.event("toggle"), Accepted)
            assert driver.ex.state == expected


class TestTrafficLight:
    def test_cycles_on_its_timers(self) -> None:
        """Green, yellow, red, green: each after its own delay in ms."""
        data = imported(TRAFFIC_LIGHT).data
        assert data["states"]["green"]["after"] == {"delay": "5000ms", "target": "yellow"}
        driver = Driver(definition(TRAFFIC_LIGHT))
        driver.start()
        assert driver.ex.state == "green"
        assert isinstance(fire(driver), Accepted)
        assert driver.ex.state == "yellow"
        fire(driver)
        assert driver.ex.state == "red"
        fire(driver)
        assert driver.ex.state == "green"


class TestFetch:
    def test_invoke_is_a_step(self) -> None:
        """The invoke's src is a declared tool, run once (no retries), with its input."""
        data = imported(FETCH).data
        assert data["tools"] == {"fetchUser": {"description": "XState actor 'fetchUser'",
                                               "action": "call"}}
        step = data["states"]["loading"]["step"]
        assert step == {"tool": "fetchUser", "retry": {"attempts_max": 1},
                        "input": {"userId": 42}}
        assert data["states"]["loading"]["on"]["step.succeeded"] == [
            {"target": "success", "actions": [{"function": "assignUser"}]}]

    def test_done_reaches_success_with_the_output_assigned(self) -> None:
        """FETCH runs the step; its success takes onDone, with its action."""
        driver = Driver(definition(FETCH))
        driver.start()
        driver.event("FETCH")
        assert driver.ex.state == "loading"
        assert driver.calls("fetchUser")[0].input == {"userId": 42}
        driver.answer("fetchUser", {"name": "Ada"})
        assert (driver.ex.state, driver.ex.status, driver.ex.outcome) == (
            "success", "final", "success")
        assert driver.ex.context["user"] == "Ada"

    def test_error_goes_to_failure_and_retry_runs_it_again(self) -> None:
        """The step's failure takes onError; RETRY calls the actor again."""
        driver = Driver(definition(FETCH))
        driver.start()
        driver.event("FETCH")
        driver.answer("fetchUser", ok=False)
        assert driver.ex.state == "failure"
        assert driver.ex.context["error"] == "permanent"
        driver.event("RETRY")
        assert driver.ex.state == "loading" and len(driver.calls("fetchUser")) == 2


class TestCheckout:
    def test_history_resumes_the_payment_method(self) -> None:
        """Back from the address resumes PayPal, chosen before, not the initial card."""
        data = imported(CHECKOUT).data
        assert data["states"]["payment"]["history"] == "shallow"
        assert data["states"]["address"]["on"]["back"] == [{"target": "payment"}]
        driver = Driver(definition(CHECKOUT))
        driver.start()
        assert driver.ex.state == "card"
        driver.event("paypal")
        driver.event("next")
        assert driver.ex.state == "address"
        driver.event("back")
        assert driver.ex.state == "paypal"

    def test_deep_history_resumes_the_leaf(self) -> None:
        """A deep history node resumes the exact leaf; a transition straight to the compound
        resumes it too natively (warned), a timer to it enters its initial state."""
        config = {"id": "m", "initial": "ed", "states": {
            "ed": {"initial": "t", "on": {"P": "prev"}, "states": {
                "t": {"initial": "t1", "states": {"t1": {"on": {"N": "t2"}}, "t2": {}}},
                "h": {"type": "history", "history": "deep"}}},
            "prev": {"on": {"BACK": "ed.h", "RESTART": "ed"}, "after": {"1000": "ed"}}}}
        result = imported(config)
        assert result.data["states"]["ed"]["history"] == "deep"
        assert at(result.findings, "history-everywhere") == ["states.prev.on.RESTART"]
        driver = Driver(load_definition(result.data))
        driver.start()
        driver.event("N")
        driver.event("P")
        driver.event("BACK")
        assert driver.ex.state == "t2"
        driver.event("P")
        fire(driver)
        assert driver.ex.state == "t1"


class TestFile:
    def test_regions_run_at_once_and_join(self) -> None:
        """Both transfers move independently; once both are final the machine is done."""
        data = imported(FILE).data
        assert data["states"]["file"]["type"] == "parallel"
        assert data["states"]["upload.idle"]["parent"] == "upload"
        driver = Driver(definition(FILE))
        driver.start()
        assert driver.ex.state == "file"
        assert [r.state for r in driver.ex.regions] == ["upload.idle", "download.idle"]
        driver.event("INIT_UPLOAD")
        driver.event("INIT_DOWNLOAD")
        driver.event("UPLOAD_COMPLETE")
        assert [r.state for r in driver.ex.regions] == ["upload.success", "download.pending"]
        driver.event("DOWNLOAD_COMPLETE")
        assert (driver.ex.state, driver.ex.status) == ("done", "final")



class TestWordProcessor:
    def test_regions_that_never_end_are_their_product(self) -> None:
        """No region ends, so the parallel state is one compound state of 2*2*2*3 children;
        each toggle moves its own region and keeps the others."""
        result = imported(WORD)
        assert at(result.findings, "parallel-product") == [""]
        states = result.data["states"]
        assert len([s for s in states.values() if s.get("parent") == "word"]) == 24
        assert result.data["reactive"] is True
        driver = Driver(definition(WORD))
        driver.start()
        assert driver.ex.state == "word.bold_off.underline_off.italics_off.list_none"
        driver.event("TOGGLE_BOLD")
        driver.event("NUMBERS")
        driver.event("TOGGLE_ITALICS")
        assert driver.ex.state == "word.bold_on.underline_off.italics_on.list_numbers"
        driver.event("TOGGLE_BOLD")
        assert driver.ex.state == "word.bold_off.underline_off.italics_on.list_numbers"

    def test_a_region_that_never_ends_and_runs_a_step_is_refused(self) -> None:
        """A region that never ends and is more than states taking events: refused, located."""
        config = copy.deepcopy(WORD)
        config["states"]["bold"]["states"]["on"]["invoke"] = {"src": "render", "onDone": "off"}
        with pytest.raises(DefinitionError, match="region has no final state") as caught:
            imported(config)
        assert at(caught.value.findings, "region-never-final") == [
            "states.bold", "states.underline", "states.italics", "states.list"]

    def test_an_event_two_regions_take_is_refused(self) -> None:
        """The product needs each event taken by one region: located where the second is."""
        config = copy.deepcopy(WORD)
        config["states"]["underline"]["states"]["off"]["on"]["TOGGLE_BOLD"] = "on"
        with pytest.raises(DefinitionError, match="both take 'TOGGLE_BOLD'") as caught:
            imported(config)
        assert caught.value.location == "states.underline.states.off.on.TOGGLE_BOLD"


class TestFeedback:
    def test_guard_and_the_fallback(self) -> None:
        """An empty submit takes the unguarded fallback (it stays in the form); a valid one
        goes to thanks; closing from anywhere ends the machine."""
        driver = Driver(definition(FEEDBACK))
        driver.start()
        driver.event("feedback.bad")
        assert driver.ex.state == "form"
        driver.event("submit")
        assert driver.ex.state == "form"
        driver.event("feedback.update", {"feedback": "great"})
        assert driver.ex.context["feedback"] == "great"
        driver.event("submit")
        assert driver.ex.state == "thanks"
        driver.event("feedback.close")
        assert (driver.ex.state, driver.ex.status) == ("closed", "final")

    def test_the_roots_transitions_reach_every_state(self) -> None:
        """The root's `on` (target `.closed`) is given to each top-level state but the final
        one, after the state's own."""
        states = imported(FEEDBACK).data["states"]
        for name in ("prompt", "form", "thanks"):
            assert states[name]["on"]["feedback.close"] == [{"target": "closed"}]
        assert "on" not in states["closed"]

    def test_guards_are_registered_functions(self) -> None:
        """A guard name is a native `function:` guard; an unregistered one is located."""
        data = imported(FEEDBACK).data
        assert data["states"]["form"]["on"]["submit"][0]["guard"] == {
            "function": "feedbackValid"}
        spec, _, _ = load_spec(data)
        missing = [f for f in check_spec(spec, functions={}) if f.code == "unknown-function"]
        assert "states.form.on.submit[0].guard" in [f.location for f in missing]

    def test_a_literal_assign_is_a_native_assign(self) -> None:
        """`assign` with a literal value is written as a native assign expression."""
        data = imported(FEEDBACK).data
        assert data["states"]["form"]["on"]["submit"][1] == {
            "actions": [{"assign": {"feedback": "''"}}]}


class TestGame:
    def test_eventless_transition_fires_once_its_guard_holds(self) -> None:
        """Points awarded by an internal transition; `always` moves on at 100."""
        driver = Driver(definition(GAME))
        driver.start()
        driver.event("award.points")
        assert driver.ex.state == "playing"
        driver.event("award.points")
        assert (driver.ex.state, driver.ex.status) == ("won", "final")


# -- what is approximated, with its location ---------------------------------------------------

class TestApproximations:
    def test_several_delays_keep_the_shortest(self) -> None:
        """Two delays on one state: the shorter one is kept, the other warned."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"after": {"3000": "c", "1000": "b"}}, "b": {"type": "final"},
            "c": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["after"] == {"delay": "1000ms", "target": "b"}
        assert at(result.findings, "after-several") == ["states.a.after.3000"]

    def test_a_guarded_delay_goes_through_a_choice(self) -> None:
        """A delayed transition with a guard and actions moves through a choice state."""
        config = {"id": "m", "initial": "a", "context": {"n": 0}, "states": {
            "a": {"after": {"500": [{"target": "b", "guard": "ready"}, {"target": "c"}]}},
            "b": {"type": "final"}, "c": {"type": "final"}}}
        data = imported(config).data
        assert data["states"]["a"]["after"] == {"delay": "500ms", "target": "a.after_500"}
        assert data["states"]["a.after_500"]["type"] == "choice"
        funcs = {"ready": lambda context, event: False}
        driver = Driver(load_definition(data, functions=funcs))
        driver.start()
        fire(driver)
        assert driver.ex.state == "c"

    def test_no_on_error_is_a_failure_final(self) -> None:
        """An invoke without onError fails the run: a final state of outcome failure."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"invoke": {"src": "work", "onDone": "b"}}, "b": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["xstate_error"]["outcome"] == "failure"
        assert at(result.findings, "no-on-error") == ["states.a.invoke"]
        driver = Driver(load_definition(result.data))
        driver.start()
        driver.answer("work", ok=False)
        assert (driver.ex.state, driver.ex.outcome) == ("xstate_error", "failure")

    def test_a_nested_final_takes_its_parents_on_done(self) -> None:
        """A final child of a compound state with onDone is a choice taking onDone at once."""
        config = {"id": "m", "initial": "work", "states": {
            "work": {"initial": "one", "onDone": "finished", "on": {"CANCEL": "cancelled"},
                     "states": {"one": {"on": {"NEXT": "two"}}, "two": {"type": "final"}}},
            "finished": {"type": "final"}, "cancelled": {"type": "final"}}}
        data = imported(config).data
        assert data["states"]["two"]["type"] == "choice"
        assert data["states"]["work"]["on"]["CANCEL"] == [{"target": "cancelled"}]
        driver = Driver(load_definition(data))
        driver.start()
        driver.event("NEXT")
        assert (driver.ex.state, driver.ex.status) == ("finished", "final")

    def test_final_output_is_kept_in_the_context(self) -> None:
        """A final state's literal output is assigned to context.output as it is entered."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"GO": "b"}}, "b": {"type": "final", "output": {"ok": True}}}}
        result = imported(config)
        assert at(result.findings, "left-out") == ["states.b.output"]
        config["states"]["b"]["output"] = [1, "two"]
        result = imported(config)
        assert result.data["states"]["b"]["entry"] == [{"assign": {"output": "[1, 'two']"}}]
        driver = Driver(load_definition(result.data))
        driver.start()
        driver.event("GO")
        assert driver.ex.context["output"] == [1, "two"]

    def test_wildcard_expands_to_the_events_not_handled(self) -> None:
        """`*` is one transition per declared event the state does not name itself."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"GO": "b", "*": "c"}}, "b": {"on": {"STOP": "c", "GO": "a"}},
            "c": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["on"]["STOP"] == [{"target": "c"}]
        assert result.data["states"]["a"]["on"]["GO"] == [{"target": "b"}]
        assert at(result.findings, "wildcard") == ["states.a.on.*"]

    def test_a_name_the_native_format_refuses_is_made_safe(self) -> None:
        """A state key and an event name with a space are renamed; the original is kept."""
        config = {"id": "m", "initial": "first step", "states": {
            "first step": {"on": {"go on": "done"}}, "done": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["first_step"]["description"] == "XState state first step"
        assert result.data["events"]["go_on"]["description"] == "XState event 'go on'"
        assert at(result.findings, "renamed-event") == ["states.first step.on.go on"]

    def test_built_in_actions_and_params_are_warned(self) -> None:
        """A built-in action is left out, a param of a named one too, each located."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"entry": [{"type": "xstate.log"}, {"type": "track", "params": {"n": 1}}],
                  "on": {"GO": "b"}},
            "b": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["entry"] == [{"function": "track"}]
        assert at(result.findings, "left-out") == ["states.a.entry[0]"]
        assert at(result.findings, "params-left-out") == ["states.a.entry[1].params"]

    def test_dead_end_is_final(self) -> None:
        """A top-level state nothing leaves is imported as a final state, with a warning."""
        config = {"id": "m", "initial": "a", "states": {"a": {"on": {"GO": "b"}}, "b": {}}}
        result = imported(config)
        assert result.data["states"]["b"]["type"] == "final"
        assert "reactive" not in result.data
        assert at(result.findings, "dead-end") == ["states.b"]


# -- targets ------------------------------------------------------------------------------------

class TestTargets:
    CONFIG: dict[str, Any] = {
        "id": "m", "initial": "a", "states": {
            "a": {"initial": "a1", "states": {
                "a1": {"on": {"SIB": "a2", "DEEP": "#m.b.b2", "CHILD": "#side"}},
                "a2": {"on": {"UP": "#m.b"}}},
                "on": {"DOWN": ".a2"}},
            "b": {"initial": "b1", "states": {"b1": {"on": {"X": "b2"}}, "b2": {"id": "side"}}},
        }}

    def test_xstate_resolution(self) -> None:
        """Siblings, `.child`, `#machine.path` and custom `#id` each find their state."""
        states = imported(self.CONFIG).data["states"]
        on = states["a1"]["on"]
        assert on["SIB"] == [{"target": "a2"}]
        assert on["DEEP"] == [{"target": "b2"}] and on["CHILD"] == [{"target": "b2"}]
        assert states["a"]["on"]["DOWN"] == [{"target": "a2"}]
        assert states["a2"]["on"]["UP"] == [{"target": "b"}]

    def test_a_target_that_does_not_exist_is_located(self) -> None:
        """A bad target is an error at the transition, with a suggestion."""
        config = copy.deepcopy(self.CONFIG)
        config["states"]["a"]["states"]["a1"]["on"]["SIB"] = "a3"
        with pytest.raises(DefinitionError, match="has no child 'a3'") as caught:
            imported(config)
        assert caught.value.location == "states.a.states.a1.on.SIB"

    def test_a_bare_target_on_the_root_is_refused_as_xstate_does(self) -> None:
        """On the root a bare name is no sibling: XState says `.name`, so do we."""
        config = {"id": "m", "initial": "a", "on": {"R": "a"},
                  "states": {"a": {"on": {"GO": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match=r"did you mean '\.a'"):
            imported(config)

    CHARGE: dict[str, Any] = {
        "id": "m", "initial": "charging", "states": {
            "charging": {"invoke": {"src": "chargeCard", "onDone": "done", "onError": "failed"},
                         "on": {"PING": {"target": "charging"}}},
            "done": {"type": "final"}, "failed": {"type": "final"}}}

    def test_a_self_target_without_reenter_stays_and_charges_once(self) -> None:
        """XState v5 does not leave an atomic state for its own target (`reenter: false` is
        the default): natively an internal transition, so PING neither restarts the invoke
        nor charges again."""
        on = imported(self.CHARGE).data["states"]["charging"]["on"]
        assert on["PING"] == [{}]
        driver = Driver(definition(self.CHARGE))
        driver.start()
        for _ in range(3):
            assert isinstance(driver.event("PING"), Accepted)
            assert driver.ex.state == "charging"
        assert len(driver.calls("chargeCard")) == 1
        driver.answer("chargeCard")
        assert driver.ex.state == "done"

    def test_a_self_target_with_reenter_leaves_and_enters_again(self) -> None:
        """With `reenter: true` the state is left and entered: each PING charges again."""
        config = copy.deepcopy(self.CHARGE)
        config["states"]["charging"]["on"]["PING"]["reenter"] = True
        on = imported(config).data["states"]["charging"]["on"]
        assert on["PING"] == [{"target": "charging"}]
        driver = Driver(definition(config))
        driver.start()
        driver.event("PING")
        driver.event("PING")
        assert len(driver.calls("chargeCard")) == 3

    def test_a_descendant_target_without_reenter_is_warned(self) -> None:
        """A compound state's transition to its child: XState v5 does not leave the compound,
        natively it is left and entered; imported as before, with a located warning."""
        result = imported(self.CONFIG)
        assert at(result.findings, "reenters") == ["states.a.on.DOWN"]

    @pytest.mark.parametrize("target", [".", "..", "a1.", "#m..a"])
    def test_a_target_with_an_empty_name_is_refused(self, target: str) -> None:
        """'.' and '..' (and any empty name in a path) name no state in XState; refused where
        written instead of resolving to the state itself."""
        config = copy.deepcopy(self.CONFIG)
        config["states"]["a"]["states"]["a1"]["on"]["SIB"] = {"target": target}
        with pytest.raises(DefinitionError, match="empty name") as caught:
            imported(config)
        assert caught.value.location == "states.a.states.a1.on.SIB.target"

    def test_leaving_a_region_is_refused(self) -> None:
        """A transition out of a region is located: natively a region ends in its finals."""
        config = copy.deepcopy(FILE)
        config["states"]["upload"]["states"]["idle"]["on"]["ABORT"] = "#file.download.idle"
        with pytest.raises(DefinitionError, match="crosses a region") as caught:
            imported(config)
        assert caught.value.location == "states.upload.states.idle.on.ABORT"


# -- bad input ----------------------------------------------------------------------------------

class TestBadInput:
    @pytest.mark.parametrize("data", [[], "machine", None, 3])
    def test_not_a_mapping(self, data: Any) -> None:
        """A document that is not an object is refused at the top."""
        with pytest.raises(DefinitionError, match="is a JSON object") as caught:
            convert(data, {}, "m.xstate.json")
        assert caught.value.findings[0].code == "not-a-machine"

    def test_unknown_top_level_key_is_warned(self) -> None:
        """An unknown key at the top is a warning, with a suggestion."""
        config = {**TOGGLE, "contxt": {}}
        result = imported(config)
        (finding,) = [f for f in result.findings if f.code == "unknown-key"]
        assert finding.location == "contxt" and "did you mean 'context'" in finding.message

    @pytest.mark.parametrize(("where", "value"), [
        ("guard", "({ context }) => context.count > 0"),
        ("actions", "() => console.log('hi')"),
    ])
    def test_javascript_where_a_name_belongs(self, where: str, value: str) -> None:
        """Code where a name is expected is refused, never evaluated."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"GO": {"target": "b", where: value}}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match="looks like JavaScript") as caught:
            imported(config)
        assert caught.value.location == f"states.a.on.GO.{where}"

    def test_named_delay_is_refused(self) -> None:
        """A delay named in the implementation, unknown to a JSON config, cannot be
        imported: located."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"after": {"LIGHT_DELAY": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match="named") as caught:
            imported(config)
        assert caught.value.location == "states.a.after.LIGHT_DELAY"

    def test_inline_actor_is_refused(self) -> None:
        """An invoke whose src is not a name (inline logic) is refused at the src."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"invoke": {"src": {"states": {}}, "onDone": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match="inline actor") as caught:
            imported(config)
        assert caught.value.location == "states.a.invoke.src"

    def test_a_file_imports_through_the_frame(self, tmp_path: Path) -> None:
        """A `*.xstate.json` file loads by its name, and lint lists the importer's warnings
        first."""
        path = tmp_path / "feedback.xstate.json"
        path.write_text(json.dumps({**FEEDBACK, "tags": ["x"]}), encoding="utf-8")
        loaded = import_definition(path, functions=FUNCTIONS)
        assert loaded.name == "feedback"
        findings: list[Finding] = lint_imported(path, functions=FUNCTIONS)
        assert findings[0].code == "left-out" and findings[0].location == "tags"
        assert not [f for f in findings if f.severity is Severity.ERROR]

    def test_a_rejected_event_stays(self) -> None:
        """An event the state does not take is rejected, as XState ignores it."""
        driver = Driver(definition(TOGGLE))
        driver.start()
        assert isinstance(driver.event("nothing"), Rejected)


class TestRefusedShapes:
    @pytest.mark.parametrize(("state", "code", "location"), [
        ({"type": "parallel", "always": "#m.b", "states": {
            "r": {"initial": "x", "states": {"x": {}, "y": {"type": "final"}}}}},
         "always-compound", "states.a.always"),
        ({"initial": "x", "invoke": {"src": "job"}, "states": {"x": {}}}, "invoke-compound",
         "states.a.invoke"),
        ({"on": {"GO": {"target": ["b", "b"]}}}, "multiple-targets", "states.a.on.GO.target"),
        ({"on": {"GO": {"target": "b", "guard": {"type": "xstate.not"}}}}, "guard-combinator",
         "states.a.on.GO.guard"),
        ({"type": "fancy"}, "bad-type", "states.a.type"),
        ({"always": {"actions": "log"}}, "always-internal", "states.a.always"),
    ])
    def test_refused_where_written(self, state: dict[str, Any], code: str,
                                   location: str) -> None:
        """Each shape with no native counterpart is an error at its XState location."""
        config = {"id": "m", "initial": "a", "states": {"a": state, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match=r"\[" + code + r"\]") as caught:
            imported(config)
        assert (caught.value.findings[0].code, caught.value.location) == (code, location)

    def test_findings_carry_the_line_known(self) -> None:
        """A finding takes the line of its location (or of the nearest key above it)."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"after": {"LATER": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match="named") as caught:
            convert(config, {"states.a.after": 7}, "m.xstate.json")
        assert caught.value.findings[0].line == 7

    def test_v4_cond_and_object_guards_are_read(self) -> None:
        """`cond` (v4) and `{type, params}` guards name the function; the rest is warned."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"GO": {"target": "b", "cond": "ok"},
                         "TRY": {"target": "b", "guard": {"type": "ok", "params": {"n": 1}}}}},
            "b": {"type": "final"}}}
        result = imported(config)
        on = result.data["states"]["a"]["on"]
        assert on["GO"][0]["guard"] == on["TRY"][0]["guard"] == {"function": "ok"}
        assert at(result.findings, "v4-key") == ["states.a.on.GO.cond"]
        assert at(result.findings, "params-left-out") == ["states.a.on.TRY.guard.params"]

    def test_unknown_state_key_is_warned(self) -> None:
        """A key XState does not know, on a state, is left out with a warning."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"onn": {"GO": "b"}, "on": {"GO": "b"}}, "b": {"type": "final"}}}
        result = imported(config)
        assert at(result.findings, "unknown-key") == ["states.a.onn"]


# -- machines read from source: inline functions, JSON.stringify's losses ----------------------

def from_source(text: str, name: str = "flow.ts") -> Any:
    """Gives the import of a TypeScript source text (the last machine it creates)."""
    return convert(text, {}, name)


class TestInlineFunctions:
    def test_an_inline_guard_is_a_registered_function_named_where_written(self) -> None:
        """An arrow-function guard the native expressions cannot say (a method call)
        becomes `inline.<file>.L<line>`, warned at its line with its code, never run."""
        result = from_source("createMachine({ initial: 'a', states: {\n"
                             "  a: { on: { GO: { target: 'b',\n"
                             "    guard: ({ context }) => context.items.some(isDone) } } },\n"
                             "  b: { type: 'final' } } })")
        assert result.data["states"]["a"]["on"]["GO"] == [
            {"target": "b", "guard": {"function": "inline.flow.L3"}}]
        (finding,) = [f for f in result.findings if f.code == "inline-function"]
        assert (finding.location, finding.line) == ("states.a.on.GO.guard", 3)
        assert "context.items.some(isDone)" in finding.message

    def test_an_inline_guard_of_one_expression_is_translated(self) -> None:
        """`({ context, event }) => ...` over context and the event's fields, in the shared
        subset, is the native guard expression that decides the same, warned."""
        result = from_source("createMachine({ context: { n: 1, last: null }, initial: 'a', "
                             "states: { a: { on: { GO: [{ target: 'b', guard: ({ context, "
                             "event }) => context.n + event.by > 2 && context.last?.ok !== "
                             "false }, { target: 'c' }] } }, b: { type: 'final' },"
                             " c: { type: 'final' } } })")
        guard = result.data["states"]["a"]["on"]["GO"][0]["guard"]
        assert guard == ("(((context.n + (event.payload['by'] if 'by' in event.payload "
                         "else None)) > 2) and ((None if context.last is None else "
                         "context.last.ok) != False))")
        assert at(result.findings, "inline-translated") == ["states.a.on.GO[0].guard"]
        for by, state in ((5, "b"), (1, "c")):
            driver = Driver(load_definition(result.data))
            driver.start()
            driver.event("GO", {"by": by})
            assert driver.ex.state == state

    def test_the_payload_fields_read_are_declared_optional(self) -> None:
        """A field an event's translated assign reads is declared in its payload schema,
        optional, so the simulator sends it (and an event without it is still taken)."""
        result = from_source("createMachine({ context: { t: null }, on: { Temp: { actions: "
                             "assign({ t: ({ event }) => event.temperature }) } } })")
        assert result.data["events"]["Temp"]["payload"] == {
            "type": "object", "properties": {"temperature": {}}}
        driver = Driver(load_definition(result.data))
        driver.start()
        driver.event("Temp", {"temperature": 21})
        assert driver.ex.context["t"] == 21
        driver.event("Temp")
        assert driver.ex.context["t"] is None

    @pytest.mark.parametrize("code", [
        "({ event }) => event.name.trim().length > 0",   # a method call
        "({ context }) => context.list[0]",             # an index
        "({ context }) => ({ ...context })",            # an object
        "({ event }) => event.error",                   # an error's shape is not the payload
        "({ event }) => event.output.user.name",        # below an event's field: no shape
        "({ context: c }) => c.n",                      # a renamed parameter
        "(_, params) => params.n",                      # params
        "({ context }) => { const n = 1; return n; }",  # a statement
    ])
    def test_what_the_native_expressions_do_not_say_stays_a_function(self, code: str
                                                                      ) -> None:
        """Code outside the shared subset is never translated halfway."""
        result = from_source(f"createMachine({{ initial: 'a', states: {{ a: {{ on: {{ GO: "
                             f"{{ target: 'b', guard: {code} }} }} }}, b: {{ type: 'final' }} "
                             "} })")
        assert result.data["states"]["a"]["on"]["GO"][0]["guard"] == {
            "function": "inline.flow.L1"}

    def test_an_assign_keeps_its_literals_and_names_its_computed_values(self) -> None:
        """`assign({n: 0, k: expr, m: fn})`: a native assign of the literal and of the
        translated value, then a registered function returning the key it computes."""
        result = from_source("createMachine({ context: { n: 5, k: 1, m: 1 }, initial: 'a', "
                             "states: {\n a: { on: { GO: { target: 'b', actions: assign({ "
                             "n: 0,\n   k: ({ context }) => context.k * 10,\n"
                             "   m: ({ context }) => Math.max(context.m, 2) }) } } },\n"
                             " b: { type: 'final' } } })")
        actions = result.data["states"]["a"]["on"]["GO"][0]["actions"]
        assert actions == [{"assign": {"n": "0", "k": "(context.k * 10)"}},
                           {"function": "inline.flow.L4"}]
        functions = {"inline.flow.L4": lambda context, event: {"m": max(context["m"], 2)}}
        driver = Driver(load_definition(result.data, functions=functions))
        driver.start()
        driver.event("GO")
        assert [driver.ex.context[k] for k in "nkm"] == [0, 10, 2]

    def test_an_inline_actor_is_a_tool_and_its_computed_input_is_left_out(self) -> None:
        """`src: fromPromise(...)` is a tool named where written; an input computed by a
        function is left out, warned."""
        result = from_source("createMachine({ initial: 'a', states: { a: { invoke: {\n"
                             "  src: fromPromise(async () => 1),\n"
                             "  input: ({ context }) => context,\n"
                             "  onDone: 'b', onError: 'b' } }, b: { type: 'final' } } })")
        assert result.data["states"]["a"]["step"]["tool"] == "inline.flow.L2"
        assert "input" not in result.data["states"]["a"]["step"]
        assert at(result.findings, "left-out") == ["states.a.invoke.input"]

    def test_an_input_object_of_context_reads_is_translated(self) -> None:
        """`input: ({ context }) => ({ name: context.name })` is the step's input, each key
        a native expression of the context, so the tool is sent what XState sends."""
        result = from_source("createMachine({ context: { name: 'World' }, initial: 'a', "
                             "states: { a: { invoke: { src: 'greet', input: ({ context }) => "
                             "({ name: context.name, loud: true }), onDone: 'b', onError: 'b' "
                             "} }, b: { type: 'final' } } })")
        assert result.data["states"]["a"]["step"]["input"] == {"name": "=context.name",
                                                               "loud": "=True"}
        assert at(result.findings, "inline-translated") == ["states.a.invoke.input"]
        driver = Driver(load_definition(result.data))
        driver.start()
        assert driver.calls("greet")[0].input == {"name": "World", "loud": True}

    def test_a_context_computed_by_a_function_starts_null(self) -> None:
        """A context value that is code (`Date.now()`) starts as null, warned."""
        result = from_source("createMachine({ context: { at: Date.now(), n: 1 },"
                             " initial: 'a', states: { a: { type: 'final' } } })")
        assert result.data["context"] == {"at": None, "n": 1}
        assert at(result.findings, "left-out") == ["context.at"]

    def test_names_xstate_allows_are_made_safe(self) -> None:
        """`'save dir'` and `'isValid?'` are XState names: imported as safe names, warned."""
        result = from_source("createMachine({ initial: 'a', states: { a: { on: { GO: {"
                             " target: 'b', guard: 'isValid?', actions: 'save dir' } } },"
                             " b: { type: 'final' } } })")
        assert result.data["states"]["a"]["on"]["GO"] == [
            {"target": "b", "guard": {"function": "isValid_"},
             "actions": [{"function": "save_dir"}]}]
        assert at(result.findings, "renamed") == ["states.a.on.GO.guard",
                                                  "states.a.on.GO.actions"]

    def test_a_guard_combinator_of_named_guards_is_one_function(self) -> None:
        """`not('won')` is the registered function `not.won`, warned."""
        result = from_source("createMachine({ initial: 'a', states: { a: { on: { GO: {"
                             " target: 'b', guard: not('won') } } }, b: { type: 'final' } } })")
        assert result.data["states"]["a"]["on"]["GO"][0]["guard"] == {"function": "not.won"}
        assert at(result.findings, "guard-combinator") == ["states.a.on.GO.guard"]


class TestStringified:
    def test_an_action_json_stringify_made_null_is_refused(self) -> None:
        """`[assign(...)]` stringified is `[null]`: refused, saying why and what to do."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"entry": [None], "on": {"GO": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match=r"JSON\.stringify writes a function in "
                                                  r"a list as null") as caught:
            imported(config)
        assert caught.value.location == "states.a.entry[0]"

    def test_a_guard_object_without_a_type_says_what_was_expected(self) -> None:
        """`guard: {}` names what a guard object needs and where, not "got None"."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"GO": {"target": "b", "guard": {"params": {"n": 1}}}}},
            "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match=r"string `type`.*has no `type` \(keys: "
                                                  r"params\)") as caught:
            imported(config)
        assert "None" not in str(caught.value)
        assert caught.value.location == "states.a.on.GO.guard"

    def test_an_empty_transition_is_warned(self) -> None:
        """`{ actions: fn }` stringified is `{}`: a transition that does nothing, warned."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"on": {"TICK": {}, "GO": "b"}}, "b": {"type": "final"}}}
        assert at(imported(config).findings, "empty-transition") == ["states.a.on.TICK"]

    def test_an_invoke_whose_logic_was_dropped_is_refused(self) -> None:
        """`src: fromPromise(...)` stringified is `{}`: refused, with the way out."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"invoke": {"src": {}, "onDone": "b"}}, "b": {"type": "final"}}}
        with pytest.raises(DefinitionError, match="import the TypeScript or JavaScript "
                                                  "source instead") as caught:
            imported(config)
        assert caught.value.location == "states.a.invoke.src"


class TestShapes:
    def test_a_machine_with_no_states_is_one_reactive_state(self) -> None:
        """A counter (`on` at the root, no `states`) is one state that takes its events
        and stays: no trap, as in XState."""
        config = {"id": "counter", "context": {"count": 0}, "on": {
            "inc": {"actions": {"type": "xstate.assign", "assignment": {"count": 1}}}}}
        result = imported(config)
        assert result.data["reactive"] is True
        state = result.data["states"]["counter"]
        assert state["on"]["inc"] == [{"actions": [{"assign": {"count": "1"}}],
                                       "target": "counter"}]
        assert at(result.findings, "reactive-self") == [""]
        driver = Driver(load_definition(result.data))
        driver.start()
        assert isinstance(driver.event("inc"), Accepted)
        assert (driver.ex.state, driver.ex.context["count"]) == ("counter", 1)

    def test_a_self_target_stays_targetless_where_re_entry_would_run_something(self
                                                                             ) -> None:
        """A one-state machine whose state has an entry action keeps its targetless
        transitions: entering again would run the entry, which XState does not."""
        config = {"id": "m", "entry": "hello", "on": {"GO": {"actions": "count"}}}
        data = imported(config).data
        assert data["states"]["m"]["on"]["GO"] == [{"actions": [{"function": "count"}]}]

    def test_a_root_timer_runs_in_every_state(self) -> None:
        """A root `after` (a deadline) times the whole machine: any state moves on."""
        config = {"id": "order", "initial": "new", "after": {"5000": ".cancelled"},
                  "states": {"new": {"on": {"confirm": "confirmed"}},
                             "confirmed": {"on": {"ship": "done"}},
                             "done": {"type": "final"},
                             "cancelled": {"type": "final"}}}
        driver = Driver(load_definition(imported(config).data))
        driver.start()
        driver.event("confirm")
        assert driver.ex.state == "confirmed"
        fire(driver)
        assert driver.ex.state == "cancelled"

    def test_always_on_a_compound_is_tried_after_the_childs_own(self) -> None:
        """A compound state's `always` is given to each child, after the child's own."""
        config = {"id": "m", "initial": "game", "context": {"over": False}, "states": {
            "game": {"initial": "a", "always": {"target": "end", "guard": "over"},
                     "states": {"a": {"on": {"GO": "b"}}, "b": {"on": {"GO": "a"}}}},
            "end": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["always"] == [
            {"target": "end", "guard": {"function": "over"}}]
        assert at(result.findings, "always-compound") == ["states.game.always"]
        over = {"over": lambda context, event: event.type == "GO"}
        driver = Driver(load_definition(result.data, functions=over))
        driver.start()
        assert driver.ex.state == "a"
        driver.event("GO")
        assert driver.ex.state == "end"


class TestGuardedResults:
    def test_an_error_no_guard_takes_stops_the_machine(self) -> None:
        """Every onError transition guarded and none holding: XState stops with the
        error, natively a failure final; not a result the machine rejects for ever."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"invoke": {"src": "job", "onDone": "b",
                             "onError": [{"target": "b", "guard": "retryable"}]}},
            "b": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["on"]["step.failed"] == [
            {"target": "b", "guard": {"function": "retryable"}}, {"target": "xstate_error"}]
        assert at(result.findings, "on-error-guarded") == ["states.a.invoke.onError"]
        driver = Driver(load_definition(result.data, functions={
            "retryable": lambda context, event: False}))
        driver.start()
        driver.answer("job", ok=False)
        assert (driver.ex.state, driver.ex.outcome) == ("xstate_error", "failure")

    def test_a_result_no_guard_takes_rests(self) -> None:
        """Every onDone transition guarded and none holding: XState stays; natively a
        resting state taking the same events."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"invoke": {"src": "job", "onError": "b",
                             "onDone": [{"target": "b", "guard": "ok"}]},
                  "on": {"STOP": "b"}},
            "b": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["on"]["step.succeeded"][-1] == {"target": "a.done"}
        assert result.data["states"]["a.done"]["on"] == {"STOP": [{"target": "b"}]}


class TestDelays:
    def test_an_iso_duration_in_json_reads_as_its_name_says(self) -> None:
        """`PT15M` in a JSON config, whose implementations are unknown, is 15 minutes,
        warned that XState itself looks the name up."""
        config = {"id": "m", "initial": "a", "states": {
            "a": {"after": {"PT15M": "b"}}, "b": {"type": "final"}}}
        result = imported(config)
        assert result.data["states"]["a"]["after"] == {"delay": "900000ms", "target": "b"}
        assert at(result.findings, "iso-delay") == ["states.a.after.PT15M"]

    def test_a_named_delay_takes_the_implementations_number(self) -> None:
        """A delay named in setup's `delays` takes the number written there (what XState
        runs), whatever its name says."""
        result = from_source("setup({ delays: { PT30D: 15 * 1000 } }).createMachine({"
                             " initial: 'a', states: { a: { after: { PT30D: 'b' } },"
                             " b: { type: 'final' } } })")
        assert result.data["states"]["a"]["after"] == {"delay": "15000ms", "target": "b"}

    def test_a_delay_the_implementations_do_not_give_fires_at_once(self) -> None:
        """Read from source, a named delay with no number in the implementations is 0 ms:
        XState raises the timer's event at once."""
        result = from_source("createMachine({ initial: 'a', states: {"
                             " a: { after: { PT2W: 'b' } }, b: { type: 'final' } } })")
        assert result.data["states"]["a"]["after"] == {"delay": "0ms", "target": "b"}
        assert at(result.findings, "delay-undefined") == ["states.a.after.PT2W"]


class TestSourceFiles:
    def test_a_typescript_file_imports_with_the_format_named(self, tmp_path: Path) -> None:
        """`--format xstate` on a `.ts` file reads its source; the findings carry its
        lines."""
        path = tmp_path / "toggle.ts"
        path.write_text("import { createMachine } from 'xstate';\n"
                        "export const m = createMachine({\n"
                        "  id: 'toggle', initial: 'off',\n"
                        "  states: { off: { on: { flip: 'on' } },\n"
                        "    on: { on: { flip: { target: 'off', guard: () => ok() } } } } });\n",
                        encoding="utf-8")
        loaded = import_definition(path, format="xstate",
                                   functions={"inline.toggle.L5": lambda c, e: True})
        assert loaded.name == "toggle"
        findings = lint_imported(path, format="xstate")
        assert [(f.code, f.line) for f in findings if f.code.startswith("inline")] == [
            ("inline-function", 5)]
