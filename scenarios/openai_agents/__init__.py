"""OpenAI Agents SDK agents under the harness (`refund`: a sound refund agent, naive ones, and
the SDK's documented human-in-the-loop shape)."""
