"""The commands a person runs (`check`, `explain`), end to end from the command line to an API
server in memory (tests/faces/fakeapi.py): flags, output documents, what goes to stderr, and
the exit codes docs/reference/cli.md promises."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller import cli
from controller.core import explain
from controller.core.basics import names
from controller.faces import terminal
from controller.kube import access, connection
from controller.settings import Settings
from tests import factories
from tests.faces.fakeapi import DROP, FakeApi

RUN = "/apis/tekton.dev/v1/namespaces/team-a/pipelineruns/build-42"
TEAM_A = "/api/v1/namespaces/team-a"
FLAGS = "/api/v1/namespaces/tekton-pipelines/configmaps/feature-flags"
OPERATOR_SA = "/api/v1/namespaces/tekton-coscheduler/serviceaccounts/tekton-coscheduler"
DEPLOYMENTS = "/apis/apps/v1/namespaces/tekton-coscheduler/deployments"
CUSTOM = "ci.example.com/coschedule"


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def deployment(env: dict[str, str], account: str = "tekton-coscheduler") -> dict[str, Any]:
    return {"metadata": {"name": "ci-tekton-coscheduler"}, "spec": {"template": {"spec": {
        "serviceAccountName": account,
        "containers": [{"name": "controller", "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            *({"name": k, "value": v} for k, v in env.items())]}]}}}}


@pytest.fixture
def api() -> Iterator[FakeApi]:
    fake = FakeApi()
    fake.put(RUN, factories.pipelinerun())
    fake.put(TEAM_A, namespace("team-a", {names.NAMESPACE_LABEL: "true"}))
    fake.put(FLAGS, {"data": {"coschedule": "disabled"}})
    fake.put(OPERATOR_SA, {"metadata": {"name": "tekton-coscheduler"}})
    for crd in ("pipelineruns.tekton.dev", f"{names.POLICY_PLURAL}.{names.POLICY_GROUP}"):
        fake.put(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}",
                 {"spec": {"versions": [{"name": "v1", "served": True}]}})
    yield fake
    fake.http.shutdown()


@pytest.fixture
def here(api: FakeApi, tmp_path: Path, clean_env: pytest.MonkeyPatch) -> Path:
    """A kubeconfig at the fake API, namespace team-a; no pod around this process."""
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR", tmp_path / "no-pod")
    clean_env.delenv("POD_NAMESPACE", raising=False)
    path = api.kubeconfig(tmp_path, namespace="team-a")
    clean_env.setenv("KUBECONFIG", str(path))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# -- explain ---------------------------------------------------------------------------------


def test_explain_takes_a_run_with_n_or_the_context_s_namespace_or_ns_slash_run(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["build-42", "-n", "team-a"], ["build-42"], ["team-a/build-42"],
                 ["team-a/build-42", "-n", "team-a"]):
        code, out, err = run(capsys, "explain", *argv)
        assert out.startswith(f"run: team-a/build-42 (uid {factories.RUN_UID})"), (argv, out, err)
        assert "namespace team-a: opted in" in out
        assert err == ""
        # The run's claim is missing and it has no balloon yet: no problem is known, exit 0.
        assert code == 0, out


def test_explain_s_exit_code_says_whether_the_run_has_problems(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(TEAM_A, namespace("team-a", {}))
    code, out, _ = run(capsys, "explain", "build-42")
    assert code == 1
    assert "namespace team-a has not opted in" in out


def test_explain_outputs_a_json_and_a_yaml_document_of_one_stable_shape(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "explain", "build-42", "-o", "json")
    doc = json.loads(out)
    assert list(doc) == ["kind", "version", "run", "namespace", "anchor", "pods", "claims",
                         "problems"]
    assert (doc["kind"], doc["version"]) == ("RunExplanation", 1)
    assert doc["run"] == {"namespace": "team-a", "name": "build-42", "uid": factories.RUN_UID,
                          "state": "running", "optedOut": False}
    assert doc["namespace"]["optedIn"] is True
    assert doc["namespace"]["label"] == f"{names.NAMESPACE_LABEL}=true"
    assert doc["anchor"] is None and doc["pods"] == [] and doc["problems"] == []
    assert doc["claims"] == [{"name": "source", "missing": True, "volume": None, "where": None,
                              "mobility": None}]
    _, out, _ = run(capsys, "explain", "build-42", "-o", "yaml")
    assert yaml.safe_load(out) == doc


def test_explain_of_a_run_that_is_not_there_says_so_on_stderr_with_exit_4(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "explain", "nope", "-o", "json")
    assert (code, out) == (4, "")
    assert err == "error: PipelineRun team-a/nope not found\n"


def test_a_refused_read_is_said_on_stderr_with_exit_3(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.failing[RUN] = 403
    code, out, err = run(capsys, "explain", "build-42")
    assert (code, out) == (3, "")
    assert err.startswith("error: cannot read the run: forbidden: User \"someone\" cannot get")


@pytest.mark.parametrize("argv", [
    ["explain"], ["explain", "a/b/c"], ["explain", "/x"], ["explain", "team-b/x", "-n", "team-a"],
    ["explain", "x", "-o", "wide"], ["check", "-o", "table"], ["nothing"],
])
def test_a_command_line_that_cannot_be_used_exits_2_with_its_reason_on_stderr(
    argv: list[str], here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        code = cli.main(argv)
        raise SystemExit(code)
    out, err = capsys.readouterr()
    assert exited.value.code == 2
    assert out == "" and "error" in err and "Traceback" not in err


def test_invalid_settings_exit_2(here: Path, clean_env: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    clean_env.setenv("COSCHEDULER_NAMESPACE_LABEL", "not a label!")
    code, out, err = run(capsys, "check")
    assert (code, out) == (2, "")
    assert "COSCHEDULER_NAMESPACE_LABEL" in err


# -- no cluster, another cluster -------------------------------------------------------------


def test_without_a_cluster_both_commands_exit_3_and_check_still_gives_its_verdict(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR", tmp_path / "no-pod")
    clean_env.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, out, err = run(capsys, "check")
    assert code == 3
    assert "verdict: NOT READY" in out and err.startswith("error: no usable kubeconfig")
    code, out, err = run(capsys, "explain", "x", "-n", "y")
    assert (code, out) == (3, "")
    assert err.startswith("error: cannot read the run: no usable kubeconfig")


def test_an_api_server_out_of_reach_exits_3(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR", tmp_path / "no-pod")
    gone = FakeApi()
    gone.http.shutdown()
    gone.http.server_close()
    clean_env.setenv("KUBECONFIG", str(gone.kubeconfig(tmp_path)))
    code, out, err = run(capsys, "explain", "x", "-o", "json")
    assert (code, out) == (3, "")
    assert err.startswith("error: cannot read the run: cannot reach the API server")
    code, out, err = run(capsys, "check", "-o", "json")
    assert code == 3 and json.loads(out)["ready"] is False


def test_an_api_server_lost_during_check_is_said_and_exits_3(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.failing["/api/v1/namespaces/tekton-pipelines/configmaps/pipelines-info"] = DROP
    code, out, err = run(capsys, "check")
    assert code == 3
    assert "[FAIL] cluster: lost: cannot reach the API server" in out
    assert out.rstrip().endswith("verdict: NOT READY (1 problem(s))")
    assert err.startswith("error: cannot reach the API server")


def test_kubeconfig_and_context_choose_the_cluster_and_its_namespace_before_or_after_the_command(
    api: FakeApi, tmp_path: Path, clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR", tmp_path / "no-pod")
    clean_env.setenv("KUBECONFIG", str(tmp_path / "absent"))
    other = FakeApi()  # the current context: a cluster without the run
    try:
        path = other.kubeconfig(tmp_path, "elsewhere", others={"lab": (api.url, "team-a")})
        assert run(capsys, "--kubeconfig", str(path), "explain", "build-42")[0] == 4
        for argv in (["--kubeconfig", str(path), "--context", "lab", "explain", "build-42"],
                     ["explain", "build-42", "--kubeconfig", str(path), "--context", "lab"],
                     ["--context", "lab", "explain", "--kubeconfig", str(path), "build-42"]):
            code, out, _ = run(capsys, *argv)
            assert code == 0 and out.startswith("run: team-a/build-42"), argv
        code, _, err = run(capsys, "--kubeconfig", str(path), "--context", "nope", "check")
        assert code == 3 and "nope" in err
    finally:
        other.http.shutdown()


# -- check -----------------------------------------------------------------------------------


def granted(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, _ = run(capsys, "check", *argv)
    return code, out


def test_check_reviews_each_permission_of_the_access_list_for_the_operator_s_service_account(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(f"{DEPLOYMENTS}/ci", deployment({}))
    code, out = granted(capsys)
    assert code == 0, out
    assert out.rstrip().endswith("verdict: ready")
    assert ("every permission the operator needs is granted to ServiceAccount "
            "tekton-coscheduler/tekton-coscheduler") in out
    wanted = sum(len(a.verbs) for a in access.REQUIRED)
    assert len(api.reviews) == wanted
    assert {r["kind"] for r in api.reviews} == {"SubjectAccessReview"}
    spec = api.reviews[0]["spec"]
    assert spec["user"] == "system:serviceaccount:tekton-coscheduler:tekton-coscheduler"
    assert set(spec["groups"]) == {"system:serviceaccounts",
                                   "system:serviceaccounts:tekton-coscheduler",
                                   "system:authenticated"}
    lease = next(r["spec"] for r in api.reviews
                 if r["spec"]["resourceAttributes"]["resource"] == "leases")
    assert lease["resourceAttributes"]["namespace"] == "tekton-coscheduler"

    api.allow = lambda spec: spec["resourceAttributes"]["resource"] != "leases"
    code, out = granted(capsys)
    assert code == 1 and "verdict: NOT READY (3 problem(s))" in out
    assert ("[FAIL] rbac create coordination.k8s.io/leases: denied to ServiceAccount "
            "tekton-coscheduler/tekton-coscheduler (leader election") in out


def test_check_s_service_account_flags_name_whom_it_reviews(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put("/api/v1/namespaces/ops/serviceaccounts/tcs", {"metadata": {"name": "tcs"}})
    code, _ = granted(capsys, "--operator-namespace", "ops", "--service-account", "tcs")
    assert code == 0
    assert {r["spec"]["user"] for r in api.reviews} == {"system:serviceaccount:ops:tcs"}


def test_a_service_account_that_does_not_exist_is_one_failure_not_a_denial_per_verb(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = granted(capsys, "--service-account", "absent")
    assert code == 1
    assert "[FAIL] operator: ServiceAccount tekton-coscheduler/absent not found" in out
    assert api.reviews == [] and "rbac" not in out


def test_a_caller_who_may_not_review_another_gets_its_own_access_labelled_as_such(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.failing["/apis/authorization.k8s.io/v1/subjectaccessreviews"] = 403
    api.allow = lambda spec: spec["resourceAttributes"]["resource"] != "nodepools"
    code, out = granted(capsys)
    assert code == 1
    assert ("[warn] rbac: the caller may not create SubjectAccessReviews (User \"someone\" "
            "cannot get") in out
    assert "not ServiceAccount tekton-coscheduler/tekton-coscheduler's" in out
    assert "[FAIL] rbac list karpenter.sh/nodepools: denied to the caller (" in out
    assert {r["kind"] for r in api.reviews} == {"SelfSubjectAccessReview"}
    assert len(api.reviews) == sum(len(a.verbs) for a in access.REQUIRED)


def test_a_review_that_cannot_be_asked_at_all_is_a_warning_not_a_traceback(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.failing["/apis/authorization.k8s.io/v1/subjectaccessreviews"] = 403
    api.failing["/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"] = 500
    code, out = granted(capsys)
    assert code == 0  # a warning never makes the verdict
    assert "[warn] rbac get pipelineruns: cannot ask: 500" in out
    assert "[warn] rbac: the caller may not create SubjectAccessReviews" in out


def test_as_caller_reviews_the_caller_s_own_access(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = granted(capsys, "--as-caller")
    assert code == 0
    assert "every permission the operator needs is granted to the caller" in out
    assert {r["kind"] for r in api.reviews} == {"SelfSubjectAccessReview"}


def test_check_outputs_a_document(api: FakeApi, here: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, out = granted(capsys, "-o", "json")
    doc = json.loads(out)
    assert list(doc) == ["kind", "version", "ready", "problems", "checks"]
    assert (doc["kind"], doc["version"], doc["ready"], doc["problems"]) == (
        "CheckReport", 1, True, 0)
    assert doc["checks"][0] == {"level": "ok", "name": "settings", "detail": "valid"}
    assert {c["level"] for c in doc["checks"]} <= {"ok", "warn", "fail"}
    assert yaml.safe_load(granted(capsys, "-o", "yaml")[1]) == doc


# -- the configured label --------------------------------------------------------------------


def test_advice_names_the_label_the_operator_s_deployment_sets(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(f"{DEPLOYMENTS}/ci", deployment({"COSCHEDULER_NAMESPACE_LABEL": CUSTOM,
                                             "COSCHEDULER_NAMESPACE_LABEL_VALUE": "yes"}))
    code, out, _ = run(capsys, "explain", "build-42")
    assert code == 1  # team-a carries the default label, not the operator's
    assert f"label it {CUSTOM}=yes: kubectl label namespace team-a {CUSTOM}=yes" in out
    assert "from Deployment tekton-coscheduler/ci-tekton-coscheduler" in out
    assert names.NAMESPACE_LABEL not in out
    _, out = granted(capsys)
    assert (f"[  ok] opt-in label: {CUSTOM}=yes (from Deployment "
            "tekton-coscheduler/ci-tekton-coscheduler)") in out
    assert f"[warn] opted-in namespaces: none yet: kubectl label namespace NAME {CUSTOM}=yes" in out

    api.put(TEAM_A, namespace("team-a", {CUSTOM: "yes"}))
    code, out, _ = run(capsys, "explain", "build-42")
    assert code == 0 and "namespace team-a: opted in" in out
    assert "[  ok] opted-in namespaces: 1: team-a" in granted(capsys)[1]


def test_the_label_in_this_command_s_environment_wins_as_in_the_operator_s_pod(
    api: FakeApi, here: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(f"{DEPLOYMENTS}/ci", deployment({"COSCHEDULER_NAMESPACE_LABEL": "other.io/x"}))
    clean_env.setenv("COSCHEDULER_NAMESPACE_LABEL", CUSTOM)
    _, out, _ = run(capsys, "explain", "build-42")
    assert f"label it {CUSTOM}=true" in out and "other.io/x" not in out
    assert "from this command's environment (COSCHEDULER_NAMESPACE_LABEL)" in out


def test_an_unreadable_deployment_leaves_the_default_label_said_to_be_assumed(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.failing[DEPLOYMENTS] = 403
    code, out, _ = run(capsys, "explain", "build-42")
    assert code == 0  # team-a carries the default label
    assert ("the default, assumed: cannot read the Deployments of namespace tekton-coscheduler: "
            "403") in out
    assert "[warn] opt-in label: tekton-coscheduler.dev/enabled=true (the default, assumed" in (
        granted(capsys)[1])


def test_the_operator_s_deployment_is_the_one_running_as_its_service_account() -> None:
    other = deployment({"COSCHEDULER_NAMESPACE_LABEL": "a.io/b"}, account="someone-else")
    ours = deployment({"COSCHEDULER_NAMESPACE_LABEL": CUSTOM})
    plain = {"metadata": {"name": "web"}, "spec": {"template": {"spec": {"containers": [
        {"name": "web", "env": [{"name": "X", "value": "1"}]}]}}}}
    assert explain.operator_env([plain, other, ours], "tekton-coscheduler") == (
        "ci-tekton-coscheduler", {"COSCHEDULER_NAMESPACE_LABEL": CUSTOM})
    assert explain.operator_env([plain, other], "tekton-coscheduler") is None


# -- in a pod, and as a kubectl plugin -------------------------------------------------------


def pod(tmp_path: Path, sub: str) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir(exist_ok=True)
    claims = json.dumps({"sub": sub}).encode()
    import base64

    payload = base64.urlsafe_b64encode(claims).decode().rstrip("=")
    (directory / "token").write_text(f"eyJhbGciOiJSUzI1NiJ9.{payload}.c2ln")
    (directory / "namespace").write_text("ops\n")
    return directory


def test_in_a_pod_the_operator_is_the_pod_s_own_service_account(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR",
                      pod(tmp_path, "system:serviceaccount:ops:tcs"))
    clean_env.delenv("POD_NAMESPACE", raising=False)
    inside = connection.Target(client=None, namespace="ops", in_cluster=True)  # type: ignore[arg-type]
    assert connection.pod_service_account() == ("ops", "tcs")
    assert terminal.operator_ref(inside, None, None) == terminal.OperatorRef("ops", "tcs", True)
    assert terminal.operator_ref(inside, None, "other") == terminal.OperatorRef(
        "ops", "other", False)
    outside = connection.Target(client=None, namespace="x", in_cluster=False)  # type: ignore[arg-type]
    assert terminal.operator_ref(outside, None, None) == terminal.OperatorRef(
        "tekton-coscheduler", "tekton-coscheduler", False)
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR", pod(tmp_path, "alice"))
    assert connection.pod_service_account() is None


def test_in_the_operator_s_pod_check_reviews_its_own_access(
    api: FakeApi, tmp_path: Path, clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """The chart grants the operator no SubjectAccessReviews: in its own pod, the caller is the
    ServiceAccount, and its own review is the one asked."""
    clean_env.setattr(connection, "SERVICE_ACCOUNT_DIR",
                      pod(tmp_path, "system:serviceaccount:ops:tcs"))
    clean_env.setenv("POD_NAMESPACE", "ops")
    path = api.kubeconfig(tmp_path)
    real = connection.connect

    def in_pod(kubeconfig: str | None = None, context: str | None = None) -> connection.Target:
        return connection.Target(real(str(path)).client, "ops", in_cluster=True)

    clean_env.setattr("controller.faces.check.connect", in_pod)
    api.failing["/apis/authorization.k8s.io/v1/subjectaccessreviews"] = 403
    code, out = granted(capsys)
    assert code == 0, out
    assert "granted to ServiceAccount ops/tcs (the caller)" in out
    assert {r["kind"] for r in api.reviews} == {"SelfSubjectAccessReview"}


def test_kubectl_finds_the_same_command_as_its_plugin_on_path(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())[
        "project"]["scripts"]
    assert scripts["kubectl-coscheduler"] == scripts["tekton-coscheduler"] == "controller.cli:main"
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/kubectl-coscheduler", "check"])
    assert cli.parser().prog == "kubectl coscheduler"
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/tekton-coscheduler", "check"])
    assert cli.parser().prog == "tekton-coscheduler"


# -- the operator's own connections ----------------------------------------------------------


@pytest.fixture
def named() -> Iterator[None]:
    yield
    connection.name_cluster(None, None)


def test_the_operator_connects_to_the_cluster_named_on_its_command_line_kopf_and_child_too(
    api: FakeApi, tmp_path: Path, clean_env: pytest.MonkeyPatch, named: None
) -> None:
    """`run --kubeconfig K --context C`: the operator's clients, kopf's login and the
    reconciler it starts all go to that context's cluster, even in a pod."""
    import kopf

    from controller.faces import app, kopf_handlers

    other = FakeApi()
    try:
        path = other.kubeconfig(tmp_path, others={"lab": (api.url, "team-a")})
        assert connection.kopf_credentials() is None
        connection.name_cluster(str(path), "lab")
        assert connection.load_client_config().configuration.host == api.url
        # kopf's decorator types the handler as its ActivityFn; it is the function as written.
        login: Any = kopf_handlers.login
        info = login(settings=kopf.OperatorSettings(), logger=None)
        assert info is not None and (info.server, info.scheme, info.token) == (
            api.url, "Bearer", "t")
        assert app.reconciler_argv()[-3:] == [
            f"--kubeconfig={path}", "--context=lab", "reconcile"]
    finally:
        other.http.shutdown()


def test_run_and_reconcile_take_the_global_flags_after_the_command_too() -> None:
    args = cli.parser().parse_args(["reconcile", "--kubeconfig=/k", "--context=lab"])
    assert (args.kubeconfig, args.context) == ("/k", "lab")
    args = cli.parser().parse_args(["--context=lab", "run"])
    assert (args.kubeconfig, args.context) == (None, "lab")


def test_check_asks_for_the_access_of_the_operator_that_keeps_its_own_certificate(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """webhook.tls.mode controller: the operator writes its CA and certificate to a Secret and
    the CA to the webhook configuration. `check` reads that mode from the operator's Deployment
    and asks for that access too: a Role that lacks it is a failure before any admission
    call fails."""
    api.put(f"{DEPLOYMENTS}/ci", deployment({"COSCHEDULER_WEBHOOK_TLS_SECRET": "tcs-tls",
                                             "COSCHEDULER_WEBHOOK_CONFIGURATION": "tcs"}))
    code, out = granted(capsys)
    assert code == 0, out
    assert "[  ok] tls: the operator keeps its own webhook certificate" in out
    assert len(api.reviews) == sum(len(a.verbs) for a in (*access.REQUIRED,
                                                          *access.SELF_MANAGED_TLS))
    secret = next(r["spec"]["resourceAttributes"] for r in api.reviews
                  if r["spec"]["resourceAttributes"]["resource"] == "secrets")
    assert secret["namespace"] == "tekton-coscheduler"

    api.allow = lambda spec: spec["resourceAttributes"]["resource"] != (
        "mutatingwebhookconfigurations")
    code, out = granted(capsys)
    assert code == 1
    assert ("[FAIL] rbac patch admissionregistration.k8s.io/mutatingwebhookconfigurations: "
            "denied to ServiceAccount tekton-coscheduler/tekton-coscheduler") in out


# -- check beside Tekton's affinity assistant -------------------------------------------------


def assistant_checks(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code, out = granted(capsys, "-o", "json")
    doc = json.loads(out)
    return code, {c["name"]: c for c in doc["checks"] if "assistant" in c["name"]}


@pytest.mark.parametrize(("flags", "state"), [
    ({"coschedule": "disabled"}, "off (coschedule: disabled)"),
    ({}, "on, mode workspaces (coschedule unset: Tekton's default)"),
    ({"coschedule": "workspaces"}, "on, mode workspaces: a placeholder per claim"),
    ({"coschedule": "pipelineruns"}, "on, mode pipelineruns (alpha)"),
    ({"coschedule": "isolate-pipelinerun"}, "on, mode isolate-pipelinerun (alpha)"),
])
def test_check_is_ready_beside_tekton_s_assistant_in_any_mode_and_says_what_it_means(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str],
    flags: dict[str, str], state: str,
) -> None:
    api.put(FLAGS, {"data": flags})
    code, checks = assistant_checks(capsys)
    assert code == 0
    assert all(c["level"] == "ok" for c in checks.values()), checks
    assert checks["tekton affinity assistant"]["detail"].startswith(state)
    assert checks["tekton assistant, opted-in namespaces"]["detail"].startswith(
        "tekton-coscheduler anchors each run: a balloon")
    assert "untouched by tekton-coscheduler" in checks[
        "tekton assistant, other namespaces"]["detail"]
    limit = checks.get("tekton assistant, tekton's limit")
    assert (limit is not None) is (flags.get("coschedule", "workspaces") == "workspaces")
    _, out = granted(capsys)
    assert f"[  ok] tekton affinity assistant: {state}" in out
    assert out.rstrip().endswith("verdict: ready")


def test_check_names_an_old_flag_tekton_reads_no_more_and_a_mode_it_does_not_know(
    api: FakeApi, here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(FLAGS, {"data": {"coschedule": "disabled", "disable-affinity-assistant": "true"}})
    code, checks = assistant_checks(capsys)
    assert code == 0
    old = checks["tekton assistant, old flag"]
    assert old["level"] == "ok" and "do not read it" in old["detail"]
    api.put(FLAGS, {"data": {"coschedule": "sometimes"}})
    code, checks = assistant_checks(capsys)
    assert code == 0  # Tekton's problem, said; the operator serves either way
    assert list(checks) == ["tekton affinity assistant"]
    assert checks["tekton affinity assistant"]["level"] == "warn"
    assert "not a mode Tekton knows" in checks["tekton affinity assistant"]["detail"]


def test_the_retired_ignore_variable_changes_nothing_and_is_refused_by_no_one(
    api: FakeApi, here: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api.put(FLAGS, {"data": {"coschedule": "workspaces"}})
    _, before = assistant_checks(capsys)
    clean_env.setenv("COSCHEDULER_IGNORE_TEKTON_ASSISTANT", "true")
    code, after = assistant_checks(capsys)
    assert code == 0 and after == before
    assert "ignore_tekton_assistant" not in Settings.model_fields
