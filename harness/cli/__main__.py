"""`python -m harness.cli`: the `fsmharness` command."""

from harness.cli.main import main

main()
