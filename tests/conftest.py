import os
import sys

from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile(
    "recipe", deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
# CI replays a fixed set of examples (a red CI blocks a landing, so it must not depend on luck);
# local runs draw new examples every time and keep exploring.
settings.register_profile("ci", parent=settings.get_profile("recipe"), derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "recipe")
