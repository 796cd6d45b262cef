"""The states holding state lists: Parallel (a region per branch) and Map (an item flow, with
the synthetic state drawing the items an ItemReader reads), and how they end (`done`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_machine.importers.asl.analysis import read_before_written
from reference_machine.importers.asl.conversion import Part, Scope, safe_id
from reference_machine.importers.asl.expressions import jsonata_refused
from reference_machine.importers.asl.paths import NATIVE_ID, coalesce, parse_path, render
from reference_machine.importers.asl.retries import synthetic_retry
from reference_machine.importers.asl.schemas import ITEMS_MAX, data_schema

__all__ = ["CompositeStates"]


class CompositeStates(Part):
    """Converts Parallel and Map states."""

    def convert_parallel(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                         native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Parallel state: a region per branch."""
        branches = state.get("Branches")
        if not isinstance(branches, list) or not branches:
            raise self.sink.fatal("asl-invalid", f"{location}.Branches",
                                  "a Parallel needs Branches, a non-empty list")
        native["type"] = "parallel"
        for index, branch in enumerate(branches):
            where = f"{location}.Branches[{index}]"
            if not isinstance(branch, Mapping):
                raise self.sink.fatal("asl-invalid", where,
                                      "a branch is a mapping with StartAt and States")
            region = self.conv.unique(f"{sid}__branch{index + 1}")
            self.conv.states[region] = {"parent": sid,
                                        "description": f"branch {index + 1} of {sid}"}
            self.conv.regions_of.setdefault(location, []).append(region)
            inner = self.conv.document.scope(branch, f"{where}.", region, region)
            self.conv.document.states_of(branch, inner)
        if state.get("Retry"):
            self.sink.warning("asl-retry-composite", f"{location}.Retry",
                              "a Parallel or Map is not retried natively: its Retry is left out")
        native["done"] = self._join(state, scope, location, "merged contexts of the branches")

    def _join(self, state: Mapping[str, Any], scope: Scope, location: str, what: str,
              catches: list[dict[str, Any]] | None = None) -> list[Any]:
        moves: list[Any] = []
        if catches is None:
            catches = self.conv.retries.catches(state.get("Catch"), scope, f"{location}.Catch")
        for index, catch in enumerate(catches):
            guard = "event.payload.failing"
            if catch["categories"] is not None:
                guard = self._composite_guard(state, location, index) or guard
            move: dict[str, Any] = {"target": catch["target"], "guard": guard}
            if catch["actions"]:
                move["actions"] = catch["actions"]
            moves.append(move)
        if not catches or catches[-1]["categories"] is not None:
            moves.append({"target": self.conv.final(scope, "failure", "an uncaught error"),
                          "guard": "event.payload.failing"})
        success: dict[str, Any] = {"target": self.conv.next_target(state, scope, location)}
        if state["Type"] == "Parallel":
            where = f"{location}.ResultPath" if "ResultPath" in state else location
            self.sink.warning("asl-parallel-result", where,
                              f"the branches' outputs are not gathered in an array: the {what} "
                              "go on")
        moves.append(success)
        self.conv.success_moves = [success]
        return moves

    def _composite_guard(self, state: Mapping[str, Any], location: str, index: int
                         ) -> str | None:
        """Gives the guard of a Parallel's catcher of named errors: a branch ended in a Fail
        state of that error; None (any failure) where that cannot be told."""
        where = f"{location}.Catch[{index}].ErrorEquals"
        errors = state["Catch"][index]["ErrorEquals"]
        named = [e for e in errors if not e.startswith("States.") or e not in (
            "States.TaskFailed", "States.Timeout", "States.HeartbeatTimeout",
            "States.Permissions", "States.Runtime")]
        regions = self.conv.regions_of.get(location, [])
        if state.get("Type") != "Parallel" or len(named) != len(errors) or not regions:
            self.sink.warning("asl-catch-composite", where,
                              "a failed branch or item tells no error natively: this catcher "
                              "takes every failure")
            return None
        tests = [f"event.payload.outcomes[{region!r}] == {('failure.' + safe_id(e))!r}"
                 for region in regions for e in named]
        return f"event.payload.failing and ({' or '.join(tests)})"

    def convert_map(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                    native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Map state: its item flow, the items it goes over, and where their
        results go."""
        key = "ItemProcessor" if "ItemProcessor" in state else "Iterator"
        flow = state.get(key)
        if not isinstance(flow, Mapping):
            raise self.sink.fatal("asl-invalid", f"{location}.ItemProcessor",
                                  "a Map needs ItemProcessor (or Iterator) with StartAt and States")
        config = flow.get("ProcessorConfig")
        if isinstance(config, Mapping) and config.get("Mode") == "DISTRIBUTED":
            self.sink.warning("asl-map-distributed", f"{location}.{key}.ProcessorConfig",
                              "a distributed map is read as an inline one (its items in the "
                              "context)")
        reader = scope.entry.get(location[len(scope.prefix):])
        for extra in ("ItemReader", "ResultWriter", "ItemBatcher", "ItemSelector",
                      "Parameters", "ToleratedFailurePercentage",
                      "ToleratedFailurePercentagePath", "ToleratedFailureCountPath",
                      "MaxConcurrencyPath", "Label"):
            if extra in state and not (extra == "ItemReader" and reader is not None):
                self.sink.warning("asl-map-field", f"{location}.{extra}",
                                  f"{extra} is not modelled natively (each item's context is the "
                                  "item): left out")
        native["type"] = "map"
        items_read: tuple[str | int, ...] | None = None  # where the items are in the data
        items: str | None
        if reader is not None:
            items = render((f"asl_items_{sid}",))
        elif jsonata and "Items" in state:
            items = self.conv.expressions.jsonata(state["Items"], f"{location}.Items", "context")
            if items is None:
                raise jsonata_refused(self.sink, state["Items"], f"{location}.Items")
        else:
            path = state.get("ItemsPath", "$")
            if path == "$":
                items = "context.items"
                items_read = ("items",)
                self.sink.warning("asl-map-items", f"{location}.ItemsPath",
                                  "the map's input is its items (ItemsPath $): natively the "
                                  "context is a mapping, so the items are read from "
                                  "context.items")
            else:
                items = self.conv.data_paths.read(str(path), f"{location}.ItemsPath")
                parsed_items = parse_path(str(path))
                if parsed_items is not None and parsed_items[0] == "$":
                    items_read = tuple(parsed_items[1])
        native["items"] = coalesce(items, "[]") if items != "[]" else items
        concurrency = state.get("MaxConcurrency")
        if isinstance(concurrency, int) and concurrency > 0:
            native["concurrency_max"] = concurrency
        tolerated = state.get("ToleratedFailureCount")
        if isinstance(tolerated, int) and tolerated > 0:
            native["tolerated_failures"] = tolerated
        percent = state.get("ToleratedFailurePercentage")
        if isinstance(percent, int | float) and percent >= 100:
            native["tolerated_failures"] = 1_000_000
        catches = self.conv.retries.catches(state.get("Catch"), scope, f"{location}.Catch")
        if reader is not None:
            # drawn before the item flow's reads are known: they shape the items, below
            initial = native.pop("initial", False)
            reader_state = self._item_reader(sid, state, scope, location, catches, jsonata)
            if initial:
                reader_state["initial"] = True
        self.conv.reads_by_flow.append([])
        inner = self.conv.document.scope(flow, f"{location}.{key}.", sid, sid)
        self.conv.document.states_of(flow, inner)
        # an item's data is the item: what its flow reads before writing it shapes the items
        shape = data_schema(self.conv.reads_by_flow.pop(),
                            read_before_written(flow, self.conv.flat), self.conv.flat,
                            items_min=1, identified=True)
        if items_read:
            self.conv.data_paths.note(items_read, "Items", shape)
        if reader is not None:
            tool = reader_state["step"]["tool"]
            if "output" not in self.conv.tools_file.get(tool, {}):
                self.conv.tools[tool]["output"] = {
                    "type": "object", "required": ["items"], "properties": {"items": {
                        "type": "array", "minItems": 1, "maxItems": ITEMS_MAX, "items": shape}}}
            self.conv.states[reader] = self.conv.with_parent(reader_state, scope)
        result_path = state.get("ResultPath", "$")
        results = None
        if isinstance(result_path, str):
            parsed = parse_path(result_path)
            if parsed and parsed[0] == "$" and len(parsed[1]) == 1 and isinstance(
                    parsed[1][0], str) and NATIVE_ID.match(parsed[1][0]):
                results = parsed[1][0]
        if "ResultSelector" in state:
            results = None  # the items' results are not what the file reads there
        if results is None:
            results = f"results_{sid}"
            if result_path is not None:
                self.sink.warning("asl-map-result", f"{location}.ResultPath",
                                  f"the items' results go to the context key {results!r} "
                                  f"(ResultPath {result_path!r} is not one top-level key)")
        native["results"] = results
        native["done"] = self._join(state, scope, location, "items' results", catches)
        if state.get("Retry"):
            self.sink.warning("asl-retry-composite", f"{location}.Retry",
                              "a Parallel or Map is not retried natively: its Retry is left out")

    def _item_reader(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                     catches: list[dict[str, Any]], jsonata: bool) -> dict[str, Any]:
        """Gives the synthetic state drawing a Map's items in its ItemReader's place: a step of
        a made-up, repeatable tool (`asl.item_reader.<map>`) whose output lists the items, put
        in the context key the map goes over; its failure takes the Map's catchers."""
        spec = state["ItemReader"]
        where = f"{location}.ItemReader"
        resource = spec.get("Resource") if isinstance(spec, Mapping) else None
        tool = f"asl.item_reader.{sid}"
        self.conv.tools[tool] = {
            "description": f"the items of map {sid} (in place of its ItemReader, {resource})",
            "repeatable": True, "idempotency_keys": True, **self.conv.tools_file.get(tool, {})}
        self.conv.synthetic.add(tool)
        self.conv.tool_where[tool] = where
        params_key = "Arguments" if jsonata else "Parameters"
        params = spec.get(params_key) if isinstance(spec, Mapping) else None
        step_input: dict[str, Any] = {}
        if params is not None:
            translated = self.conv.data_paths.template(params, f"{where}.{params_key}", (), jsonata)
            step_input = translated if isinstance(translated, dict) else {"input": translated}
        failed = [self.conv.retries.catch_move(c, "step") for c in catches]
        failed.append({"target": self.conv.final(scope, "failure", "an uncaught error")})
        self.sink.warning("asl-item-reader", where,
                          f"the items the ItemReader reads ({resource}) are drawn by a "
                          f"synthetic state calling tool {tool!r} (1 to {ITEMS_MAX} items, "
                          "shaped by what the item flow reads); its failure takes the Map's "
                          "Catch")
        return {
            "description": f"{sid}'s ItemReader (synthetic): draws the map's items",
            "step": {"tool": tool, "input": step_input, "retry": synthetic_retry()},
            "on": {"step.succeeded": {"target": sid, "actions": [
                       {"assign": {f"asl_items_{sid}": "event.payload.items"}}]},
                   "step.failed": failed},
        }
