import os
import sys

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

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
