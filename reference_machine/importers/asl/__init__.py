"""Amazon States Language (AWS Step Functions) to the native definition format.

`convert(data, lines, name)` gives the native definition data of a parsed ASL document, with a
warning finding (located in ASL terms, `States.ChargeCard.Retry[0].ErrorEquals`) for each
feature approximated or left out; what cannot be imported raises `DefinitionError`. How each
construct maps is told in `docs/importing.md`.

The converter is split by construct: `document` (the entry point, the top level and each state
list), `states` (Task, Pass, Wait, Succeed, Fail), `choices`, `composites` (Parallel and Map),
`data_paths` (reads, templates and writes of the data), `expressions` (intrinsic functions and
JSONata), `retries` (Retry and Catch), `tools`, `schemas` (the output schemas guessed from
reads) and `analysis` (what is learnt of the whole document first); `conversion` holds the
state they share.
"""

from reference_machine.importers.asl.document import convert
from reference_machine.importers.asl.schemas import SCALAR_FIELD, scalar_results
from reference_machine.importers.asl.tools import tool_name

__all__ = ["SCALAR_FIELD", "convert", "scalar_results", "tool_name"]
