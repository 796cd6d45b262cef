"""Files that break their parsers: each refused with the file, what was wrong and the bound.

A NUL in YAML, nesting deeper than any real file, an integer Python will not read, a file far
larger than its kind: every loader the CLI uses (definitions, fault plans, replay files,
reports, bench baselines) says so in one line, and a fuzzer of random bytes and random nested
values finds no other exception than the documented ones.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import Case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fault_injection import FaultPlanError, load_plan
from harness.bench.suite import load_baseline
from harness.engines.replay import ReplayError, replay
from harness.errors import HarnessError
from harness.report.document import ReportError, load_report
from reference_machine import DefinitionError, DefinitionSyntaxError, load_definition
from reference_machine.documents import (
    DEFINITION_BYTES_MAX,
    DIGITS_MAX,
    NESTING_MAX,
    read_document,
)

DEFINITION = """\
name: small
version: 1
tools:
  t.call: {idempotency_keys: true}
states:
  call:
    initial: true
    step: {tool: t.call}
    on:
      step.succeeded: done
      step.failed: failed
  done: {type: final, outcome: success}
  failed: {type: final, outcome: failure}
"""
GOOD = "{tmp}/good.yaml"
ROOT = Path(__file__).resolve().parents[2]


def _deep_yaml(levels: int) -> str:
    return DEFINITION + "description: " + "[" * levels + "]" * levels + "\n"


def _deep_json(levels: int, head: str = '"name": "small"') -> str:
    return "{" + head + ', "x": ' + "[" * levels + "]" * levels + "}"


def _long_int_json(head: str = '"name": "small"') -> str:
    return "{" + head + ', "x": ' + "9" * 5000 + "}"


def _padded(text: str, size: int) -> str:
    """Gives `text` with whitespace in front, `size` bytes in all: valid, only too large."""
    return " " * (size - len(text)) + text


_MANY_KEYS = DEFINITION + "context:\n" + "".join(f"  k{i}: {i}\n" for i in range(60_000))
_BENCH_HEAD = '"kind": "fsmharness.bench", "format": 1'
_REPORT_HEAD = '"kind": "fsmharness.report", "format": 1'
_REPLAY_HEAD = '"kind": "fsmharness.replay", "format": 1'


def _definition_cases(command: tuple[str, ...]) -> list[Case]:
    verb = command[0]
    return [
        Case(f"{verb}: NUL in YAML", (*command, "{tmp}/w.yaml"), 2, "line 14: YAML syntax: "
             "character #x0000 is not allowed", {"w.yaml": DEFINITION + "note: a\x00b\n"}),
        Case(f"{verb}: escape in YAML", (*command, "{tmp}/w.yaml"), 2, "character #x001b",
             {"w.yaml": DEFINITION + "note: \x1b[31m\n"}),
        Case(f"{verb}: YAML 500 deep", (*command, "{tmp}/w.yaml"), 2,
             f"w.yaml: line 14: YAML syntax: nested more than {NESTING_MAX} levels deep",
             {"w.yaml": _deep_yaml(500)}),
        Case(f"{verb}: JSON 1,000 deep", (*command, "{tmp}/w.json"), 2,
             f"w.json: nested more than {NESTING_MAX} levels deep",
             {"w.json": _deep_json(1000)}),
        Case(f"{verb}: JSON 150 deep", (*command, "{tmp}/w.json"), 2,
             f"w.json: nested more than {NESTING_MAX} levels deep",
             {"w.json": _deep_json(150)}),
        Case(f"{verb}: 5,000-digit YAML integer", (*command, "{tmp}/w.yaml"), 2,
             f"line 2: YAML syntax: an integer of 5,000 digits; at most {DIGITS_MAX:,} digits",
             {"w.yaml": DEFINITION.replace("version: 1", "version: " + "7" * 5000)}),
        Case(f"{verb}: 5,000-digit JSON integer", (*command, "{tmp}/w.json"), 2,
             f"w.json: line 1: an integer of 5,000 digits; at most {DIGITS_MAX:,} digits",
             {"w.json": _long_int_json()}),
        Case(f"{verb}: month 13", (*command, "{tmp}/w.yaml"), 2,
             "line 14: YAML syntax: cannot read the value '2024-13-01': month must be in 1..12",
             {"w.yaml": DEFINITION + "description: 2024-13-01\n"}),
        Case(f"{verb}: 60,000 keys, over the size bound", (*command, "{tmp}/w.yaml"), 2,
             "w.yaml: 938 kB is over the 500 kB a definition may be", {"w.yaml": _MANY_KEYS}),
        Case(f"{verb}: not UTF-8", (*command, "{tmp}/w.yaml"), 2,
             "line 14: not UTF-8 text: byte 0xff at offset 270",
             {"w.yaml": DEFINITION.encode() + b"x: \xff\n"}),
    ]


CASES = [
    *_definition_cases(("fuzz", "--runs", "1", "--no-report")),
    *_definition_cases(("run",)),
    Case("plan: NUL in YAML", ("run", GOOD, "--plan", "{tmp}/plan.yaml"), 2,
         "plan.yaml:1: YAML syntax: character #x0000",
         {"good.yaml": DEFINITION, "plan.yaml": "faults:\x00\n"}),
    Case("plan: YAML 500 deep", ("run", GOOD, "--plan", "{tmp}/plan.yaml"), 2,
         f"nested more than {NESTING_MAX} levels deep",
         {"good.yaml": DEFINITION, "plan.yaml": "faults: " + "[" * 500 + "]" * 500}),
    Case("plan: JSON 1,000 deep", ("run", GOOD, "--plan", "{tmp}/plan.json"), 2,
         f"nested more than {NESTING_MAX} levels deep",
         {"good.yaml": DEFINITION, "plan.json": '{"faults": ' + "[" * 1000 + "]" * 1000 + "}"}),
    Case("plan: 5,000-digit integer", ("run", GOOD, "--plan", "{tmp}/plan.json"), 2,
         "an integer of 5,000 digits",
         {"good.yaml": DEFINITION, "plan.json": '{"swarm": ' + "1" * 5000 + "}"}),
    Case("plan: over the size bound", ("run", GOOD, "--plan", "{tmp}/plan.yaml"), 2,
         "plan.yaml: 1.1 MB is over the 500 kB a fault plan may be",
         {"good.yaml": DEFINITION, "plan.yaml": "faults: {}\n" + "#" * 1_100_000 + "\n"}),
    Case("replay: 1,000 deep", ("replay", "{tmp}/r.json"), 2,
         f"r.json: nested more than {NESTING_MAX} levels deep",
         {"r.json": _deep_json(1000, _REPLAY_HEAD)}),
    Case("replay: 150 deep", ("replay", "{tmp}/r.json"), 2,
         f"r.json: nested more than {NESTING_MAX} levels deep",
         {"r.json": _deep_json(150, _REPLAY_HEAD)}),
    Case("replay: 5,000-digit integer", ("replay", "{tmp}/r.json"), 2,
         "r.json: line 1: an integer of 5,000 digits", {"r.json": _long_int_json(_REPLAY_HEAD)}),
    Case("replay: over the size bound", ("replay", "{tmp}/r.json"), 2,
         "r.json: 16.1 MB is over the 16 MB a replay file may be",
         {"r.json": _padded("{" + _REPLAY_HEAD + "}", 16_100_000)}),
    Case("replay: not UTF-8", ("replay", "{tmp}/r.json"), 2, "not UTF-8 text: byte 0xfe",
         {"r.json": b'{"kind": "\xfe"}'}),
    Case("report: 1,000 deep", ("report", "{tmp}/r.json"), 2,
         f"r.json: nested more than {NESTING_MAX} levels deep",
         {"r.json": _deep_json(1000, _REPORT_HEAD)}),
    Case("report: 150 deep", ("report", "{tmp}/r.json"), 2,
         f"r.json: nested more than {NESTING_MAX} levels deep",
         {"r.json": _deep_json(150, _REPORT_HEAD)}),
    Case("report: 5,000-digit integer", ("report", "{tmp}/r.json"), 2,
         "r.json: line 1: an integer of 5,000 digits", {"r.json": _long_int_json(_REPORT_HEAD)}),
    Case("bench baseline: 1,000 deep", ("bench", "--compare", "{tmp}/b.json"), 2,
         f"b.json: nested more than {NESTING_MAX} levels deep",
         {"b.json": _deep_json(1000, _BENCH_HEAD)}),
    Case("bench baseline: 5,000-digit integer", ("bench", "--compare", "{tmp}/b.json"), 2,
         "b.json: line 1: an integer of 5,000 digits", {"b.json": _long_int_json(_BENCH_HEAD)}),
    Case("bench baseline: over the size bound", ("bench", "--compare", "{tmp}/b.json"), 2,
         "b.json: 16.1 MB is over the 16 MB a bench document may be",
         {"b.json": _padded("{" + _BENCH_HEAD + "}", 16_100_000)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_loader(case: Case, hostile: Callable[[Case], subprocess.CompletedProcess[str]]) -> None:
    """A file its parser cannot take: exit 2, one line naming the file and what was wrong."""
    hostile(case)


@pytest.mark.parametrize(("name", "content", "fragment"), [
    ("w.yaml", DEFINITION + "note: a\x00b\n", "w.yaml:14: error: (file): YAML syntax: character "
                                              "#x0000 is not allowed"),
    ("w.json", _deep_json(1000), f"nested more than {NESTING_MAX} levels deep [unreadable]"),
    ("w.yaml", _MANY_KEYS, "938 kB is over the 500 kB a definition may be [unreadable]"),
])
def test_lint_says_why_a_file_is_unreadable(tmp_path: Path, name: str, content: str,
                                            fragment: str) -> None:
    """lint reports an unreadable file among its findings (exit 2), with no traceback."""
    (tmp_path / name).write_text(content, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "lint", name], cwd=tmp_path,
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert fragment in done.stdout, done.stdout


class TestReadDocument:
    def test_nesting_to_the_bound_is_read(self, tmp_path: Path) -> None:
        """Exactly `NESTING_MAX` levels load; one more is refused."""
        path = tmp_path / "d.json"
        path.write_text("[" * NESTING_MAX + "]" * NESTING_MAX)
        assert read_document(path, what="a test", bytes_max=1000)[0] == (
            json.loads("[" * NESTING_MAX + "]" * NESTING_MAX))
        path.write_text("[" * (NESTING_MAX + 1) + "]" * (NESTING_MAX + 1))
        with pytest.raises(DefinitionError, match="nested more than 100 levels deep"):
            read_document(path, what="a test", bytes_max=1000)

    def test_aliases_cannot_nest_past_the_bound(self) -> None:
        """Each anchor one level deeper than the last: nesting the text does not show."""
        text = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 150))
        with pytest.raises(DefinitionError, match="nested more than 100 levels deep through "
                                                  "aliases"):
            load_definition(text)

    def test_many_values_are_not_called_aliases(self) -> None:
        """A document with too many values says so, not that aliases expanded it."""
        text = "name: x\nx: [" + "1," * 100_001 + "]\n"
        with pytest.raises(DefinitionError, match=r"holds more than 100,000 values"):
            load_definition(text)

    def test_a_fifo_sized_file_is_read_to_one_byte_past_the_bound(self, tmp_path: Path) -> None:
        """The bound holds on what is read, not on what the file says its size is."""
        path = tmp_path / "d.json"
        path.write_text(_padded("{}", DEFINITION_BYTES_MAX + 1))
        with pytest.raises(DefinitionError, match=r"500 kB is over the 500 kB a test may be"):
            read_document(path, what="a test", bytes_max=DEFINITION_BYTES_MAX)

    def test_text_over_the_bound_is_refused(self) -> None:
        """A definition given as text is held to the same bound as a file."""
        with pytest.raises(DefinitionError, match=r"is over the 500 kB a definition may be"):
            load_definition(DEFINITION + "#" * DEFINITION_BYTES_MAX)


# -- the fuzzer: any bytes, any nested value, to every loader ----------------------------------

_LEAVES = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
    st.integers(), st.integers(min_value=10 ** 990, max_value=10 ** 1200),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(["fsmharness.report", "fsmharness.replay", "fsmharness.bench", "name",
                     "states", "faults", "kind", "format", "\x00", "\u2028", "&a", "*a"]))
_VALUES = st.recursive(
    _LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["kind", "format", "name", "states", "faults", "results", "targets",
                         "choices", "definition", "x", "\x00"]) | st.text(max_size=8),
        inner, max_size=4), max_leaves=20)
_HEADS = [{}, {"kind": "fsmharness.report", "format": 1},
          {"kind": "fsmharness.replay", "format": 1}, {"kind": "fsmharness.bench", "format": 1}]


def _nested(depth: int) -> Any:
    value: Any = 0
    for level in range(depth):
        value = [value] if level % 2 else {"x": value}
    return value


_DOCUMENTS = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda head, value: json.dumps({**head, "x": value}).encode(),
              st.sampled_from(_HEADS), _VALUES),
    st.builds(lambda value: json.dumps(value).encode(), _VALUES),
    st.builds(lambda depth: json.dumps(_nested(depth)).encode(),
              st.integers(min_value=NESTING_MAX - 3, max_value=NESTING_MAX + 3)),
    st.builds(lambda depth: ("[" * depth + "]" * depth).encode(),
              st.sampled_from([NESTING_MAX, NESTING_MAX + 1, 600, 1500])),
)

#: What each loader may raise: its documented error, and nothing else.
_LOADERS: list[tuple[str, Callable[[Path], object], tuple[type[Exception], ...]]] = [
    ("definition", load_definition, (DefinitionError,)),
    ("plan", load_plan, (FaultPlanError,)),
    ("replay", replay, (ReplayError,)),
    ("report", load_report, (ReportError,)),
    ("baseline", load_baseline, (HarnessError,)),
]


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(content=_DOCUMENTS, yaml_too=st.booleans())
def test_no_loader_raises_an_undocumented_exception(tmp_path: Path, content: bytes,
                                                    yaml_too: bool) -> None:
    """Random bytes and random nested values: each loader gives a value or its own error."""
    for kind, load, documented in _LOADERS:
        suffix = ".yaml" if yaml_too and kind in ("definition", "plan") else ".json"
        path = tmp_path / f"{kind}{suffix}"
        path.write_bytes(content)
        with contextlib.suppress(*documented):
            load(path)


def test_the_bundled_files_still_load() -> None:
    """The bounds are generous: every scenario and saved replay file is within them."""
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        load_definition(path)
    for path in sorted((ROOT / "tests" / "data" / "replays").glob("*.json")):
        read_document(path, what="a replay file", bytes_max=16_000_000, yaml_ok=False)
    load_baseline(ROOT / "reports" / "benchmarks" / "baseline.json")


_FINAL = "states:\n  s: {initial: true, type: final, outcome: success}\n"


def _laughs(levels: int) -> str:
    """Gives YAML whose alias chain expands to 10**levels scalars ("billion laughs")."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_alias_bombs_are_unreadable_but_reuse_loads() -> None:
    """A recursive alias or a billion laughs is unreadable input; a reused anchor loads."""
    recursive = "name: wf\ncontext: &a {x: *a}\n" + _FINAL
    with pytest.raises(DefinitionSyntaxError, match=r"a YAML alias refers to itself") as info:
        load_definition(recursive)
    assert [f.code for f in info.value.findings] == ["unreadable"]
    assert info.value.findings[0].line == 2

    started = time.perf_counter()
    with pytest.raises(DefinitionSyntaxError,
                       match=r"expands to more than 100000 nodes through aliases") as info:
        load_definition("name: wf\ncontext:\n" + textwrap.indent(_laughs(9), "  ") + _FINAL)
    assert [f.code for f in info.value.findings] == ["unreadable"]
    assert time.perf_counter() - started < 10

    reuse = textwrap.dedent("""
        name: wf
        tools:
          t.a: {idempotency_keys: true}
        states:
          one:
            initial: true
            step:
              tool: t.a
              retry: &policy {attempts_max: 5, delay_initial: 2s, delay_max: 30s}
            on: {step.succeeded: two, step.failed: failed}
          two:
            step:
              tool: t.a
              retry: *policy
            on: {step.succeeded: done, step.failed: failed}
          done: {type: final, outcome: success}
          failed: {type: final, outcome: failure}
    """)
    definition = load_definition(reuse)
    policies = [(s.attempts_max, s.delay_initial_ms, s.delay_max_ms)
                for s in (definition.states["one"].step, definition.states["two"].step)
                if s is not None]
    assert policies == [(5, 2000, 30_000), (5, 2000, 30_000)]


def test_alias_bomb_in_a_mapping_key_is_bounded() -> None:
    """A list or mapping used as a key (where an alias bomb could hide) is refused at once."""
    levels = 6  # 10**6 nodes: ten times the limit, about a second to expand today
    anchors = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    text = f"name: wf\n? [{', '.join(anchors)}]\n: 1\n" + _FINAL
    with pytest.raises(DefinitionSyntaxError,
                       match=r"line 2: a key must be plain text, not a list or mapping"):
        load_definition(text)
