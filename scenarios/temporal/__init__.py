"""Temporal workflows under the harness (temporalio, history mode: no server): a sound refund
workflow and the naive ones the harness catches (`refund`)."""
