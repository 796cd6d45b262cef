"""XState's delayed transitions (`after`) as the native timer: the delay read as XState runs
it, and a guarded or acting transition taken through a choice state."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from reference_machine.importers.xstate.common import item_location
from reference_machine.importers.xstate.conversion import Part
from reference_machine.importers.xstate.nodes import StateNode

__all__ = ["TimerReader"]

#: An ISO 8601 duration as XState reads a delay: weeks, days, hours, minutes, seconds.
_ISO_DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?"
                           r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?"
                           r"(?:(\d+(?:\.\d+)?)S)?)?")


class TimerReader(Part):
    """Writes a state's `after` as its timer (or its children's, for a compound state)."""

    def after(self, node: StateNode, out: dict[str, Any]) -> None:
        loc = node.at("after")
        written = node.config["after"]
        if not isinstance(written, Mapping) or not written:
            self.sink.error("bad-after", loc, "`after` is a JSON object of delays in ms")
            return
        delays: list[tuple[int, str, Any]] = []
        for key, transitions in written.items():
            where = f"{loc}.{key}"
            ms = self._delay(str(key), where)
            if ms is None:
                continue
            if ms < 0:
                self.sink.error("bad-after", where, f"a delay is zero or more ms, got {ms}")
                continue
            delays.append((ms, where, transitions))
        if not delays:
            return
        delays.sort(key=lambda d: d[0])
        ms, where, transitions = delays[0]
        for other, other_where, _ in delays[1:]:
            self.sink.warning("after-several", other_where, f"a native state has one timer: the "
                              f"shortest delay ({ms} ms) is kept and this one ({other} ms) is left "
                              "out")
        converted = self.transitions.read(node, transitions, where)
        if not converted:
            return
        if len(converted) == 1 and set(converted[0]) <= {"target"} and "target" in converted[0]:
            target = converted[0]["target"]
        else:
            target = self.ctx.fresh(f"{node.native}.after_{ms}")
            for index, transition in enumerate(converted):
                if "target" not in transition:
                    self.sink.error("after-internal", item_location(where, index, transitions), "a "
                                    "delayed transition without a target has no native counterpart "
                                    "(a native timer leaves its state)")
            choice: dict[str, Any] = {"type": "choice", "always": converted,
                                      "description": f"XState state {'.'.join(node.path)}, "
                                                     f"after {ms} ms"}
            if "parent" in out:
                choice["parent"] = out["parent"]
            self.ctx.states[target] = choice
            if all("guard" in t for t in converted):
                self.sink.warning("after-guarded", where, "every delayed transition is guarded: "
                                  "when none holds, the native timer's event is rejected (XState "
                                  "ignores it)")
        after = {"delay": f"{ms}ms", "target": target}
        if node.kind == "compound" or self.parallel.flat(node):
            self.sink.warning("after-compound", loc, "a compound state's timer runs while any "
                              "child is active; the native format times leaves, so it is given to "
                              "each child without a timer of its own, and restarts as the child "
                              "changes")
            self.ctx.compound_after[node.native] = after
        else:
            out["after"] = after

    def _delay(self, key: str, loc: str) -> int | None:
        """Gives a delay in ms as XState runs it: a number; a name the machine's
        implementations give as a number (`delays: {PT15M: 900000}`); a name they do not
        give, read from source, 0 (XState raises the timer's event at once); in a JSON config,
        whose implementations are unknown, an ISO 8601 duration as its name says (`PT15M`,
        `P1DT2H`), warned, and any other name refused."""
        if re.fullmatch(r"-?\d+", key):
            return int(key)
        if self.ctx.delays is not None and key in self.ctx.delays:
            return self.ctx.delays[key]
        if self.ctx.delays is not None:
            self.sink.warning("delay-undefined", loc, f"delay {key!r} is named, and the machine's "
                              "implementations (setup or createMachine's second argument) give it "
                              "no number: XState then raises the timer's event at once, so it is "
                              "imported as 0 ms (give it in `delays` if it is provided elsewhere)")
            return 0
        iso = _ISO_DURATION.fullmatch(key)
        if iso is not None and any(iso.groups()):
            weeks, days, hours, minutes, seconds = (float(g) if g else 0.0
                                                    for g in iso.groups())
            total = (((weeks * 7 + days) * 24 + hours) * 60 + minutes) * 60 + seconds
            ms = round(total * 1000)
            self.sink.warning("iso-delay", loc, f"delay {key!r} is read as the ISO 8601 duration "
                              f"its name says ({ms} ms); XState itself reads no durations: it "
                              "looks the name up in the machine's `delays` and, finding none, "
                              "fires at once")
            return ms
        if key.startswith("P"):
            self.sink.error("named-delay", loc, f"delay {key!r} is not an ISO 8601 duration "
                            "XState reads (P[nW][nD][T[nH][nM][nS]], no years or months)")
        else:
            self.sink.error("named-delay", loc, f"delay {key!r} is named and its value is not "
                            "written as a number where the machine is set up (`delays: "
                            f"{{{key}: 5000}}` in setup or createMachine's second argument: a "
                            "function there is JavaScript); write it in ms")
        return None
