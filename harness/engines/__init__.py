"""The engines that explore a workflow: native seeded fuzzing, shrinking, replay files,
exhaustive bounded search, the Hypothesis machine, and campaigns (a target run through an
engine into a report section).

`fuzz` (in `fuzz`) reads as its phases over collaborators of their own modules: the
determinism sample (`determinism_sample`), the runs as seed batches (`seed_batches`) or guided
rounds (`guided_rounds`, over `guided`'s corpus), each judged by the run judge (`judge`) and
added up in the tally (`tally`), shrinking and replay files (`failures`, `shrink`, `replay`),
the runs aimed at untested gaps (`aimed`), fresh interpreters' second opinion (`elsewhere`),
and the report (`fuzz_report`; its options in `fuzz_options`). Where runs happen is one
protocol, `executor.Executor`, chosen once by `executor_for`: in this process (`in_process`),
in forked children (`forked`, over `isolation`), or on a Dask cluster (`cluster`). The other
engines: `exhaustive`, `stateful` (the Hypothesis machine), `campaign`, `fleet`.

It may import `harness.report`, `harness.adapters`, `harness.checks` and `harness.sim`.
"""
