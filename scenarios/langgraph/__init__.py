"""LangGraph graphs under the harness (`pip install 'fsmharness[langgraph]'`): a sound refund
agent and the naive ones the harness catches (`refund`), and graphs written the way four of
LangGraph's public bug reports write them (`upstream`)."""
