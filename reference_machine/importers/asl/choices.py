"""Choice states: each rule (every comparison, the `...Path` forms, the `Is*` tests, `And`,
`Or`, `Not`; or a JSONata `Condition`) as the guard of an eventless branch."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reference_machine.importers._common import literal as _literal
from reference_machine.importers.asl.conversion import Part, Scope
from reference_machine.importers.asl.expressions import jsonata_refused
from reference_machine.importers.asl.paths import parse_path

__all__ = ["ChoiceRules"]

#: The native type test of each ASL type test, and of each typed comparison's family.
_TYPE_TESTS = {"IsString": "is_string", "IsNumeric": "is_number", "IsBoolean": "is_bool",
               "IsTimestamp": "is_string"}
_FAMILY_TESTS = {"String": "is_string", "Timestamp": "is_string", "Numeric": "is_number",
                 "Boolean": "is_bool"}
_RULE_FIELDS = frozenset(("Next", "Comment", "Assign", "Condition"))
_COMPARISONS = {
    "Equals": "==", "LessThan": "<", "GreaterThan": ">",
    "LessThanEquals": "<=", "GreaterThanEquals": ">=",
}


class ChoiceRules(Part):
    """Converts Choice states and their rules."""

    def convert_choice(self, sid: str, state: Mapping[str, Any], scope: Scope, location: str,
                       native: dict[str, Any], jsonata: bool) -> None:
        """Converts a Choice state: a guarded eventless branch per rule, then the Default
        (or a failure)."""
        rules = state.get("Choices")
        if not isinstance(rules, list) or not rules:
            raise self.sink.fatal("asl-invalid", f"{location}.Choices",
                                  "a Choice needs Choices, a non-empty list")
        branches: list[Any] = []
        for index, rule in enumerate(rules):
            where = f"{location}.Choices[{index}]"
            if not isinstance(rule, Mapping) or "Next" not in rule:
                raise self.sink.fatal("asl-invalid", where,
                                      "a choice rule is a mapping with a Next")
            target = self.conv.target(rule["Next"], scope, f"{where}.Next")
            if jsonata or "Condition" in rule:
                guard = self.conv.expressions.jsonata(rule.get("Condition"),
                                                      f"{where}.Condition", "context")
                if guard is None:
                    raise jsonata_refused(self.sink, rule.get("Condition"), f"{where}.Condition")
            else:
                guard = self._rule(rule, where)
            branch: dict[str, Any] = {"target": target, "guard": guard}
            if "Assign" in rule:
                assigns = self.conv.data_paths.assign(rule["Assign"], f"{where}.Assign", jsonata)
                if assigns:
                    branch["actions"] = [{"assign": assigns}]
            branches.append(branch)
        default = state.get("Default")
        if default is not None:
            branches.append(self.conv.target(default, scope, f"{location}.Default"))
        else:
            branches.append({"target": self.conv.final(scope, "failure", "an uncaught error"),
                             "description": "States.NoChoiceMatched"})
            self.sink.warning("asl-choice-no-default", location,
                              "a Choice with no Default: a run no rule matches fails with "
                              "States.NoChoiceMatched (give it a Default, or a last rule that "
                              "takes the rest)")
        for index, branch in enumerate(branches):
            if isinstance(branch, str):
                branches[index] = {"target": branch}
        native.update(type="choice", always=branches)
        self.conv.success_moves = list(branches)

    def _rule(self, rule: Mapping[str, Any], location: str) -> str:
        """Gives the guard text of an ASL (JSONPath) choice rule."""
        if not isinstance(rule, Mapping):
            raise self.sink.fatal("asl-invalid", location, "a choice rule is a mapping")
        if "And" in rule or "Or" in rule:
            key = "And" if "And" in rule else "Or"
            parts = rule[key]
            if not isinstance(parts, list) or not parts:
                raise self.sink.fatal("asl-invalid", f"{location}.{key}",
                                      f"{key} is a non-empty list of rules")
            joined = f" {key.lower()} ".join(
                f"({self._rule(p, f'{location}.{key}[{i}]')})" for i, p in enumerate(parts))
            return joined
        if "Not" in rule:
            inner = self._rule(rule["Not"], f"{location}.Not")
            # a comparison of a variable that is not there fails the run in Step Functions,
            # and matches no rule here: neither does its negation (else a loop whose exit
            # compares the head of a list emptied ran on forever)
            there = sorted({self.conv.data_paths.present(path, f"{location}.Not") for path in
                            _compared_paths(rule["Not"])} - {"True"})
            if not there:
                return f"not ({inner})"
            return f"({' and '.join(there)} and not ({inner}))"
        variable = rule.get("Variable")
        if not isinstance(variable, str):
            raise self.sink.fatal("asl-invalid", f"{location}.Variable",
                                  "a comparison needs a Variable (a path)")
        var = self.conv.data_paths.read(variable, f"{location}.Variable")
        operators = [k for k in rule if k not in ("Variable", "Next", "Comment", "Assign")]
        parsed_var = parse_path(variable)
        if parsed_var is not None and parsed_var[0] == "$" and len(operators) == 1:
            self.conv.data_paths.note(tuple(parsed_var[1]), operators[0], rule[operators[0]])
        if len(operators) != 1:
            raise self.sink.fatal("asl-invalid", location,
                                  f"expected one comparison operator, got {operators}")
        op = operators[0]
        value = rule[op]
        where = f"{location}.{op}"
        if op.endswith("Path"):
            if not isinstance(value, str):
                raise self.sink.fatal("asl-invalid", where, f"{op} takes a path")
            other = self.conv.data_paths.read(value, where)
            base = op[: -len("Path")]
        else:
            other = None
            base = op
        if base == "IsPresent":
            # a result that replaced the data leaves the keys it lacks as null, not absent
            self.sink.warning("asl-is-present", where, "IsPresent reads as 'not null'")
            return f"{var} is not None" if value else f"{var} is None"
        if base == "IsNull":
            test = f"{var} is None"
            return test if value else f"{var} is not None"
        if base in _TYPE_TESTS:
            if base == "IsTimestamp":
                self.sink.warning("asl-choice-type-test", where,
                                  "IsTimestamp reads as 'a text' (its format is not checked)")
            test = f"{_TYPE_TESTS[base]}({var})"
            return test if value else f"not {test}"
        if base == "StringMatches":
            if not isinstance(value, str):
                raise self.sink.fatal("asl-invalid", where, "StringMatches takes a pattern string")
            # a value of another type matches no pattern (a comparison of types is false)
            return f"(is_string({var}) and ({self._matches(var, value, where)}))"
        for family in ("String", "Numeric", "Boolean", "Timestamp"):
            if base.startswith(family) and base[len(family):] in _COMPARISONS:
                symbol = _COMPARISONS[base[len(family):]]
                break
        else:
            raise self.sink.fatal("asl-invalid", where, f"unknown comparison operator {op!r}")
        if family == "Timestamp":
            self.sink.warning("asl-timestamp-text", where,
                              "timestamps are compared as text (exact for ISO 8601 in one time "
                              "zone)")
        if other is None:
            self._check_operand(family, value, where)
            other = _literal(value) or "None"
        # a typed comparison of a value of another type is false, never an error (a text is
        # not less than 5; true is no number, 0 no boolean)
        test = _FAMILY_TESTS[family]
        return f"({test}({var}) and {test}({other}) and {var} {symbol} {other})"

    def _check_operand(self, family: str, value: Any, where: str) -> None:
        ok = {
            "String": isinstance(value, str),
            "Timestamp": isinstance(value, str),
            "Numeric": isinstance(value, int | float) and not isinstance(value, bool),
            "Boolean": isinstance(value, bool),
        }[family]
        if not ok:
            raise self.sink.fatal("asl-invalid", where,
                                  f"a {family} comparison takes a {family.lower()}, got "
                                  f"{value!r}")

    def _matches(self, var: str, pattern: str, where: str) -> str:
        parts, current, escaped = [], "", False
        for ch in pattern:
            if escaped:
                current += ch
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == "*":
                parts.append(current)
                current = ""
            else:
                current += ch
        parts.append(current)
        if len(parts) == 1:
            return f"{var} == {parts[0]!r}"
        prefix, suffix, middle = parts[0], parts[-1], [p for p in parts[1:-1] if p]
        if middle:
            self.sink.warning("asl-string-matches", where,
                              f"pattern {pattern!r}: only its start {prefix!r} and end "
                              f"{suffix!r} are checked natively")
        tests = [f"{var} is not None", f"len({var}) >= {len(prefix) + len(suffix)}"]
        tests += [f"{var}[{i}] == {c!r}" for i, c in enumerate(prefix)]
        tests += [f"{var}[{i - len(suffix)}] == {c!r}" for i, c in enumerate(suffix)]
        text = " and ".join(tests)
        if len(text) > 900:
            self.sink.warning("asl-string-matches", where,
                              f"pattern {pattern!r} is too long to check natively: read as "
                              "'present'")
            return f"{var} is not None"
        return f"({text})"


def _compared_paths(rule: Any) -> Iterator[str]:
    """Gives the paths a choice rule compares (its `Variable`s and `...Path` operands), but
    those tested for presence or null, which a missing value answers."""
    if not isinstance(rule, Mapping):
        return
    for key in ("And", "Or"):
        if isinstance(rule.get(key), list):
            # a path the group tests for presence or null is the group's to answer missing
            tested = {part.get("Variable") for part in rule[key] if isinstance(part, Mapping)
                      and ("IsPresent" in part or "IsNull" in part)}
            for part in rule[key]:
                yield from (path for path in _compared_paths(part) if path not in tested)
    if "Not" in rule:
        yield from _compared_paths(rule["Not"])
    if any(key in rule for key in ("IsPresent", "IsNull")):
        return
    for key, value in rule.items():
        if isinstance(value, str) and (key == "Variable" or key.endswith("Path")):
            yield value
