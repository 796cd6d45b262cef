"""The fault catalogue, fault plans and injectors (arrives with the simulator issue)."""

__all__: list[str] = []
