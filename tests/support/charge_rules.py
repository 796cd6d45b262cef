"""A user's invariant module, imported with `--import charge_rules`: registers
`charge_checks.charged_twice` as the rule `one_charge_per_order`."""

from __future__ import annotations

from charge_checks import charged_twice

from harness import invariant

invariant(name="one_charge_per_order")(charged_twice)
