import os
import sys

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

# the real-engine fixtures (``vllm``, ``vllm_guidance``): tests/real_engine.py
pytest_plugins = ["real_engine"]

settings.register_profile(
    "recipe", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
# CI replays a fixed set of examples (a red CI blocks a landing, so it must not depend on luck);
# local runs draw new examples every time and keep exploring.
settings.register_profile("ci", parent=settings.get_profile("recipe"), derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "recipe")


@pytest.fixture(autouse=True, scope="session")
def _strict_openai_responses_models():
    """Every Responses event and response the tests produce passes the openai SDK's strict
    ``model_validate`` (tests/sdk_strict.py)."""
    try:
        import openai  # noqa: F401
    except ImportError:  # (the SDK is in the test extras; without it nothing to check against)
        yield
        return
    from sdk_strict import strict_responses_encoder

    yield from strict_responses_encoder()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_engine: runs against a real vLLM (tests/real_engine.py; RECIPE_VLLM_PYTHON)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """A failed real-engine test's report ends with the running engines' logs."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and item.get_closest_marker("real_engine") is not None:
        from real_engine import RUNNING

        for name, server in list(RUNNING.items()):
            report.sections.append((f"{name} log ({server.log_path})", server.log_tail()))
