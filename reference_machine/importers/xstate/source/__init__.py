"""XState machines read from their TypeScript or JavaScript source, with no JavaScript run
(docs/importing.md, "XState from its source", says what is read).

`machines(text, name)` finds each `createMachine({...})` call (also `setup({...})
.createMachine({...})` and `createMachine(config, implementations)`) and reads its config, an
object literal, as the JSON data `xstate.convert` takes, each function in it kept where it was
written as an inline reference (`{"type": "inline:<file>:<line>", "code": "<its text>"}`).
`native_expression(code)` and `native_object(code)` give the native expressions an inline arrow
function of `context` and the event computes, where both languages say it alike.

`tokens` splits the text into tokens as they are asked for, `reader` reads the literal subset
and the machines, `expressions` translates an arrow function.
"""

from reference_machine.importers.xstate.source.expressions import (
    native_expression,
    native_object,
)
from reference_machine.importers.xstate.source.reader import (
    INLINE_PREFIX,
    SOURCE_SUFFIXES,
    Machine,
    inline_reference,
    machines,
)

__all__ = ["INLINE_PREFIX", "SOURCE_SUFFIXES", "Machine", "inline_reference", "machines",
           "native_expression", "native_object"]
