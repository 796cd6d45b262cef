"""Shared pytest configuration: `pytester` for the tests of the fsmharness pytest plugin."""

pytest_plugins = ["pytester"]


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def postgres_dsn():  # type: ignore[no-untyped-def]
    """A real PostgreSQL server for the session (see tests/support/postgres_server.py)."""
    from postgres_server import server

    with server() as dsn:
        yield dsn


@pytest.fixture(scope="session")
def redis_url():  # type: ignore[no-untyped-def]
    """A real Redis server for the session (see tests/support/redis_server.py)."""
    from redis_server import server

    with server() as url:
        yield url
