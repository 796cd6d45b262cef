"""Scenarios on pydantic-ai agents whose tools need approval (`refund`)."""
