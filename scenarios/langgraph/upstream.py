"""Graphs written the way four of LangGraph's public bug reports write them, each with the tool
call that makes the reported behaviour a side effect the ledger sees. On langgraph 1.2.22
(langgraph-checkpoint-sqlite 3.1.2) the harness finds each (tests/contract/
test_langgraph_findings.py pins them: findings about LangGraph, not failures of fsmharness):

- `error_handler_again` (langchain-ai/langgraph#9002): a node's `error_handler` runs, pages
  someone, and a parallel node interrupts; on resume the handler runs again (its first write
  is replaced) and pages again.
- `sync_checkpoint` (#8039): under `durability="sync"` a task's `put_writes` and the next
  checkpoint's `put` are not ordered; a crash inside the checkpoint's save re-executes the
  step (its effect twice) when the writes had not reached the file, and replays the step from
  its writes when they had.
- `exit_before_checkpoint` (#8764): under `durability="exit"` a crash after the node's effect
  leaves nothing stored; `invoke(None)` then raises `EmptyInputError` (the run is lost).
- `interrupt_in_loop` (#7780): a node that asks again in a loop until the answer is valid
  re-runs from its top on every resume, earlier answers replayed: four answers run the
  body ten times.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langgraph.errors import NodeError
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from harness.adapters import GraphBox, langgraph_target

#: A pager and an answer log, as plain HTTP calls: no idempotency keys.
PLAIN = {"idempotency_keys": False}


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def error_handler_graph(box: GraphBox) -> StateGraph:
    """#9002: `a` always fails and its error handler pages; `b`, beside it, asks a human."""

    def a(state: Log) -> dict[str, Any]:
        raise ValueError("a failed")

    def page(state: Log, error: NodeError) -> dict[str, Any]:
        box.call("pager.page", {"node": str(error.node)})
        return {"log": ["paged"]}

    def b(state: Log) -> dict[str, Any]:
        answer = interrupt("b needs input")
        return {"log": [f"b:{answer}"]}

    graph = StateGraph(Log)
    graph.add_node("a", a, error_handler=page)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge(START, "b")
    graph.add_edge("a", END)
    graph.add_edge("b", END)
    return graph


def steps_graph(box: GraphBox) -> StateGraph:
    """#8039: three steps in a row, each calling a tool once."""

    def step(name: str) -> Any:
        def run(state: Log) -> dict[str, Any]:
            box.call("effect.record", {"step": name})
            return {"log": [name]}
        return run

    graph = StateGraph(Log)
    for name in ("step1", "step2", "step3"):
        graph.add_node(name, step(name))
    graph.add_edge(START, "step1")
    graph.add_edge("step1", "step2")
    graph.add_edge("step2", "step3")
    graph.add_edge("step3", END)
    return graph


def one_node_graph(box: GraphBox) -> StateGraph:
    """#8764: one node, one effect."""

    def node(state: Log) -> dict[str, Any]:
        box.call("effect.record", {"step": "node"}, key=f"{box.execution_id}/node")
        return {"log": ["node"]}

    graph = StateGraph(Log)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    return graph


class Age(TypedDict, total=False):
    age: int | None


def age_graph(box: GraphBox) -> StateGraph:
    """#7780, as the report writes it: ask until the answer is a valid age."""

    def get_age(state: Age) -> dict[str, Any]:
        prompt = "What is your age?"
        while True:
            answer = interrupt(prompt)
            box.call("answers.log", {"answer": answer})  # print(f"I got {answer}")
            if isinstance(answer, int) and answer > 0:
                return {"age": answer}
            prompt = f"'{answer}' is not a valid age. What is your age?"

    graph = StateGraph(Age)
    graph.add_node("get_age", get_age)
    graph.add_edge(START, "get_age")
    graph.add_edge("get_age", END)
    return graph


#: The answers of #7780's report, in its order: three invalid, then a valid one.
AGES = {"abc": "abc", "minus_five": -5, "zz": "zz", "thirty": 30}

error_handler_again = langgraph_target(error_handler_graph, name="error_handler_again",
                                       input={"log": []}, tools={"pager.page": PLAIN},
                                       answers={"ok": "ok"})
sync_checkpoint = langgraph_target(steps_graph, name="sync_checkpoint", input={"log": []},
                                   tools={"effect.record": PLAIN}, durability="sync")
exit_before_checkpoint = langgraph_target(
    one_node_graph, name="exit_before_checkpoint", input={"log": []},
    tools={"effect.record": {"idempotency_keys": True}}, durability="exit", resubmit=False)
interrupt_in_loop = langgraph_target(age_graph, name="interrupt_in_loop", input={"age": None},
                                     tools={"answers.log": PLAIN}, answers=AGES)
