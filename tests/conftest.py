"""Shared pytest configuration: `pytester` for the tests of the fsmharness pytest plugin, and the
fixtures over tests/support that tests in several folders use."""

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


@pytest.fixture
def hostile(tmp_path):  # type: ignore[no-untyped-def]
    """Runs a bad-input case (a `Case` of tests/support/hostile.py) in a fresh folder and checks
    the corpus's rule: its exit code and one clear line, nothing half-written, nothing else
    changed."""
    from hostile import run_case

    return lambda case: run_case(case, tmp_path)
