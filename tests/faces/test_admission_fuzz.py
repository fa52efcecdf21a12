"""The admission path under generated and mutated AdmissionReview bodies (tests/fuzz/reviews.py
is the oracle). CI runs a few thousand; `make fuzz` runs a million."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, given, settings

from tests.conftest import StaticFacts
from tests.fuzz import reviews

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3000"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
@given(body=reviews.bodies(), facts=reviews.facts())
def test_every_body_gets_a_valid_answer_and_every_patch_a_valid_pod(
    body: bytes, facts: StaticFacts
) -> None:
    reviews.judge(body, facts)


def test_the_oracle_catches_a_patch_that_drops_the_users_terms(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The oracle is only as good as what it can catch: a webhook that replaced the pod's
    required terms instead of appending must be found."""
    import json

    import pytest

    from controller.core.admission import affinity
    from tests import factories

    def replacing(spec, term):  # type: ignore[no-untyped-def]
        return [{"op": "add", "path": "/spec/affinity", "value": {"podAffinity": {
            affinity.REQUIRED: [term]}}}]

    monkeypatch.setattr(affinity, "patch_for", replacing)
    user = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    pod = factories.taskrun_pod(affinity={"podAffinity": {affinity.REQUIRED: [user]}})
    body = json.dumps(factories.admission_review(pod)).encode()
    with pytest.raises(reviews.Finding, match="existing required podAffinity term"):
        reviews.judge(body, StaticFacts())
