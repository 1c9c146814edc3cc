"""The integration fixtures (an emulated API server per test, coordinator replicas served
on 127.0.0.1), for the CLI commands that ask a coordinator."""

from tests.coordinator.integration.conftest import api, session, start

__all__ = ["api", "session", "start"]
