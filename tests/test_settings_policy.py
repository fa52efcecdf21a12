from __future__ import annotations

import pytest

from controller.core.policy import policy
from controller.core.policy.policy import Isolation
from controller.settings import Settings, SettingsError, load_settings


def test_defaults(settings: Settings) -> None:
    assert settings.topology_key == "kubernetes.io/hostname"
    assert settings.isolation is Isolation.NONE
    res = settings.balloon_resources.to_k8s()
    assert res["requests"] == res["limits"]
    assert settings.log_format == "json"


def test_environment_overrides_with_json_for_structured_values(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("COSCHEDULER_ISOLATION", "required")
    clean_env.setenv("COSCHEDULER_BALLOON_TOLERATIONS", '[{"key": "ci", "operator": "Exists"}]')
    clean_env.setenv("COSCHEDULER_BALLOON_NODE_SELECTOR", '{"pool": "ci"}')
    s = load_settings()
    assert s.isolation is Isolation.REQUIRED
    assert s.balloon_tolerations[0].to_k8s() == {"key": "ci", "operator": "Exists"}
    assert s.balloon_node_selector == {"pool": "ci"}


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("COSCHEDULER_ISOLATION", "sometimes", "'none', 'preferred' or 'required'"),
        ("COSCHEDULER_WEBHOOK_PORT", "-1", "greater than or equal to 0"),
        ("COSCHEDULER_TOPOLOGY_KEY", "not a key!", "not a valid label key"),
        ("COSCHEDULER_BALLOON_RESOURCES", '{"cpu": "lots"}', "not a Kubernetes quantity"),
        ("COSCHEDULER_BALLOON_NODE_SELECTOR", '{"pool": "has space"}', "not a valid label value"),
        ("COSCHEDULER_LOG_FORMAT", "xml", "'json' or 'console'"),
        ("COSCHEDULER_WEBHOOK_CERT_FILE", "/tmp/cert.pem", "must be set together"),
    ],
)
def test_bad_values_name_the_setting_and_what_is_allowed(
    clean_env: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    clean_env.setenv(name, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    text = str(err.value)
    assert says in text
    if "together" not in says:
        assert name in text


def test_settings_are_frozen(settings: Settings) -> None:
    with pytest.raises(ValueError):
        settings.topology_key = "x"


def _policy(name: str, created: str, spec: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "team-a", "creationTimestamp": created}, "spec": spec}


def test_policy_overrides_defaults_field_by_field(settings: Settings) -> None:
    res = policy.resolve(settings.default_policy(), [_policy("p", "2026-01-01T00:00:00Z", {
        "topologyKey": "topology.kubernetes.io/zone",
        "isolation": "preferred",
        "balloon": {"resources": {"cpu": "50m", "memory": "32Mi"},
                    "tolerations": [{"key": "ci", "operator": "Exists", "effect": "NoSchedule"}],
                    "imagePullSecrets": [{"name": "mirror"}]},
    })])
    p = res.policy
    assert (p.topology_key, p.isolation, p.resources.cpu) == ("topology.kubernetes.io/zone", Isolation.PREFERRED, "50m")
    assert p.tolerations == ({"key": "ci", "operator": "Exists", "effect": "NoSchedule"},)
    assert p.image_pull_secrets == ({"name": "mirror"},)
    assert p.node_selector == {} and p.image == settings.balloon_image
    assert p.source == "CoschedulingPolicy/p" and res.problems == ()


@pytest.mark.parametrize(
    "spec",
    [
        {"isolation": "strict"},
        {"topologyKey": "has spaces"},
        {"balloon": {"resources": {"cpu": "many"}}},
        {"balloon": {"affinity": {"nodeAfinity": {}}}},
        {"unknown": 1},
        "not-an-object",
    ],
)
def test_unusable_policy_is_reported_and_defaults_apply(settings: Settings, spec: object) -> None:
    res = policy.resolve(settings.default_policy(), [_policy("bad", "2026-01-01T00:00:00Z", spec)])
    assert res.policy == settings.default_policy()
    assert [(p.name, p.reason) for p in res.problems] == [("bad", "Invalid")]
    assert "defaults apply" in res.problems[0].message


def test_oldest_policy_wins_and_others_are_superseded(settings: Settings) -> None:
    res = policy.resolve(settings.default_policy(), [
        _policy("newer", "2026-02-01T00:00:00Z", {"isolation": "required"}),
        _policy("older", "2026-01-01T00:00:00Z", {"isolation": "preferred"}),
    ])
    assert res.policy.isolation is Isolation.PREFERRED
    assert [(p.name, p.reason) for p in res.problems] == [("newer", "Superseded")]
