"""pydantic-graph graphs under the harness (pydantic-graph 1.x, with its
`FileStatePersistence`): a sound refund graph and the naive ones the harness catches
(`refund`), and graphs written the way pydantic-graph's users and docs write them
(`upstream`)."""
