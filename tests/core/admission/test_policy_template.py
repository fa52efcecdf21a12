"""The chart's MutatingAdmissionPolicy (policy mode) read as text: its CEL names what the
webhook's pure code names, and it never hands the API server a patch value it cannot take.

What its expressions decide is held to the webhook's answers on a real API server
(e2e/tests/test_admission_parity.py); these checks need no helm and no API server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.core.model import tekton
from controller.core.placement import gate

TEMPLATE = (Path(__file__).parents[3] / "charts" / "tekton-coscheduler" / "templates"
            / "admission-policy.yaml")


def text() -> str:
    return TEMPLATE.read_text()


def helm_string(name: str) -> str:
    """The CEL text of a `{{- $name := "..." }}` of the template."""
    found = re.search(r'\{\{- \$' + name + r' := "([^"]*)" \}\}', text())
    assert found, f"${name} is not defined in {TEMPLATE.name}"
    return found.group(1)


def patch_values() -> list[str]:
    """What follows `value:` in every JSONPatch of the template, up to the next comma/brace."""
    return re.findall(r"JSONPatch\{[^}]*?value:\s*([^,}\n]+)", text(), flags=re.S)


def test_a_placeholder_is_what_the_webhook_calls_one() -> None:
    """core/model/assistant.py placeholder_run: the component label of Tekton's assistant, and
    the run's name."""
    placeholder = helm_string("placeholder")
    assert f"'{tekton.LABEL_COMPONENT}'].orValue('') == '{tekton.AFFINITY_ASSISTANT_COMPONENT}'" in placeholder
    assert f"'{tekton.LABEL_PIPELINE_RUN}'].orValue('') != ''" in placeholder


@pytest.mark.parametrize(("name", "instance"), [("pin", True), ("repel", False)])
def test_tekton_s_terms_are_told_apart_by_the_instance_label_as_the_webhook_does(
    name: str, instance: bool
) -> None:
    """Tekton's pin of a TaskRun pod names its placeholder (instance and component); the
    repulsion between placeholders names the component alone (core/model/assistant.py)."""
    term = helm_string(name)
    assert f"'{tekton.LABEL_COMPONENT}'].orValue('') == '{tekton.AFFINITY_ASSISTANT_COMPONENT}'" in term
    has_instance = f"t.?labelSelector.?matchLabels[?'{tekton.LABEL_INSTANCE}'].hasValue()"
    assert has_instance in term
    assert (f"!{has_instance}" in term) is not instance


def test_the_placeholder_gate_is_the_webhook_s() -> None:
    body = text()
    assert f"g.name == '{gate.PLACEHOLDER_GATE}'" in body  # held already: left alone
    assert f"Object.spec.schedulingGates{{name: '{gate.PLACEHOLDER_GATE}'}}" in body
    assert f"Object.spec.schedulingGates{{name: '{gate.GATE}'}}" in body


def test_both_removals_are_made_in_the_policy() -> None:
    """Tekton's pin off a TaskRun pod, the repulsion off a placeholder: each list set to [] and
    the terms that stay added back (filtered by the same test)."""
    body = text()
    for kind, name in (("podAffinity", "pin"), ("podAntiAffinity", "repel")):
        path = f"/spec/affinity/{kind}/requiredDuringSchedulingIgnoredDuringExecution"
        assert f"exists(t, {{{{ ${name} }}}})" in body
        assert f"JSONPatch{{op: 'add', path: '{path}', value: []}}" in body
        assert f"filter(t, !{{{{ ${name} }}}}).map(t,\n" in body
        assert f"JSONPatch{{op: 'add', path: '{path}/-', value: t}}" in body


def test_no_patch_value_is_a_list_of_objects() -> None:
    """kubernetes#142181: a list holding an object as a JSONPatch value panics kube-apiserver
    1.36. Lists are set to [] and their items added one by one; a value is the empty list, a
    string, one term, or one Object initializer."""
    values = patch_values()
    assert len(values) >= 10, values  # the regex still finds them
    for value in values:
        value = value.strip()
        assert (value == "[]" or value in ("term", "t") or value.startswith("'")
                or value.startswith("Object.")), value
