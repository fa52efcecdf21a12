"""Requests by path (kube/api.py), on the wire to a local HTTP server: what is sent, and what
an answer that is not a 2xx becomes."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import kubernetes
import pytest

from controller.core.basics import names
from controller.kube import connection
from controller.kube.api import ApiError, api_message, path
from controller.kube.client import Kube


class Server:
    """Answers every request with `status`, `body` and `headers`; keeps what it was sent."""

    def __init__(self) -> None:
        self.status, self.body = 200, b'{"items": [{"n": 1}]}'
        self.headers: dict[str, str] = {}
        self.seen: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                server.seen.append({"method": self.command, "path": self.path,
                                    "headers": dict(self.headers),
                                    "body": json.loads(self.rfile.read(size)) if size else None})
                self.send_response(server.status)
                for key, value in {**server.headers, "Content-Type": "application/json"}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.http.shutdown()


def kube_at(server: Server) -> Kube:
    cfg = kubernetes.client.Configuration()
    cfg.host = server.url
    cfg.api_key = {"authorization": "token-1"}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return Kube(connection.api_client(cfg), timeout=5)


def test_the_placeholders_not_scheduled_are_asked_for_by_label_and_field(server: Server) -> None:
    """Every namespace's, by the API server's selectors: what it sends back is few."""
    assert kube_at(server).list_unscheduled_placeholders() == [{"n": 1}]
    [listed] = server.seen
    where, _, query = listed["path"].partition("?")
    assert (listed["method"], where) == ("GET", "/api/v1/pods")
    assert parse_qs(query, keep_blank_values=True) == {
        "labelSelector": ["app.kubernetes.io/component=affinity-assistant"],
        "fieldSelector": ["spec.nodeName="]}


def test_a_request_goes_by_its_path_with_its_query_token_and_body(server: Server) -> None:
    kube = kube_at(server)
    assert kube.list_balloon_pods("team a", "uid-1") == [{"n": 1}]
    kube.release_pod_gate("ns", "p", "uid-2", {"spec": {"schedulingGates": []}})
    kube.patch_policy_status("ns", "default", {"phase": "Ready"})
    kube.delete_statefulset("ns", "s", uid="uid-3")
    listed, gate, status, deleted = server.seen
    assert listed["method"] == "GET"
    where, _, query = listed["path"].partition("?")
    assert where == "/api/v1/namespaces/team%20a/pods"
    assert parse_qs(query) == {
        "labelSelector": [f"{names.BALLOON_SELECTOR},{names.LABEL_RUN_UID}=uid-1"]}
    assert listed["headers"]["authorization"] == "Bearer token-1"
    assert listed["body"] is None
    assert (gate["method"], gate["path"]) == ("PATCH", "/api/v1/namespaces/ns/pods/p")
    assert gate["headers"]["Content-Type"] == "application/strategic-merge-patch+json"
    assert gate["body"] == {"spec": {"schedulingGates": []}, "metadata": {"uid": "uid-2"}}
    assert status["path"] == ("/apis/tekton-coscheduler.dev/v1alpha1/namespaces/ns/"
                              "coschedulingpolicies/default/status")
    assert status["headers"]["Content-Type"] == "application/merge-patch+json"
    assert deleted["body"] == {"propagationPolicy": "Background", "preconditions": {"uid": "uid-3"}}


def test_an_answer_not_2xx_is_the_api_error_with_the_server_s_words_and_retry_after(
    server: Server,
) -> None:
    """At once, after one request: the work queue honours Retry-After (kube/errors.py), not a
    sleep inside the call."""
    server.status, server.headers = 429, {"Retry-After": "3"}
    server.body = b'{"kind": "Status", "message": "too many requests, slow down", "code": 429}'
    with pytest.raises(ApiError) as raised:
        kube_at(server).get_pipelinerun("ns", "r")
    assert len(server.seen) == 1
    assert raised.value.status == 429
    assert api_message(raised.value) == "too many requests, slow down"
    assert raised.value.headers is not None and raised.value.headers["Retry-After"] == "3"


def test_a_gone_object_is_none_and_a_create_of_a_taken_name_is_false(server: Server) -> None:
    kube = kube_at(server)
    server.status, server.body = 404, b'{"message": "not found"}'
    assert kube.get_statefulset("ns", "s") is None
    server.status, server.body = 409, b'{"message": "already exists"}'
    assert kube.create_pod({"metadata": {"namespace": "ns", "name": "p"}}) is False
    assert server.seen[-1]["path"] == "/api/v1/namespaces/ns/pods"


@pytest.mark.parametrize(("args", "expected"), [
    (("v1", "nodes"), "/api/v1/nodes"),
    (("v1", "nodes", None, "n-1"), "/api/v1/nodes/n-1"),
    (("apps/v1", "statefulsets", "ns"), "/apis/apps/v1/namespaces/ns/statefulsets"),
    (("tekton.dev/v1", "pipelineruns", "ns", "a/b", "status"),
     "/apis/tekton.dev/v1/namespaces/ns/pipelineruns/a%2Fb/status"),
])
def test_a_path_names_its_group_namespace_name_and_subresource(
    args: tuple[Any, ...], expected: str
) -> None:
    assert path(*args) == expected


def test_credentials_are_refreshed_at_most_once_a_second_and_a_new_token_is_sent(
    server: Server, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubernetes client runs its loader's refresh hook before every request: the
    kubeconfig's (and the in-cluster one's) sets the host again, and the host's setter reads
    every variable of the environment for a proxy (3.4 s of the 28.7 s yappi counted in
    bench-scale). Refreshed once a second, a token that rotates still reaches the wire
    within that second."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": "token-1"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}))
    cfg = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg)
    environment_read: list[int] = []
    proxies = urllib.request.getproxies  # what the client's configuration module imported

    def getproxies() -> dict[str, str]:
        environment_read.append(1)
        return proxies()

    monkeypatch.setattr(kubernetes.client.configuration, "getproxies", getproxies)
    now = [100.0]
    kube = Kube(connection.api_client(cfg, clock=lambda: now[0]), timeout=5)
    for _ in range(20):
        kube.list_balloon_pods("ns", "uid-1")
    assert len(environment_read) == 1
    assert {s["headers"]["authorization"] for s in server.seen} == {"Bearer token-1"}

    token, refreshed = ["Bearer token-1"], []

    def rotating(c: kubernetes.client.Configuration) -> None:  # as the loaders' hooks do
        refreshed.append(token[0])
        c.api_key["BearerToken"] = token[0]
        # each puts itself back on the configuration (which types the hook as None, its default)
        c.refresh_api_key_hook = rotating  # type: ignore[assignment]

    cfg.refresh_api_key_hook = rotating  # type: ignore[assignment]
    kube = Kube(connection.api_client(cfg, clock=lambda: now[0]), timeout=5)
    kube.list_balloon_pods("ns", "uid-1")
    token[0] = "Bearer token-2"
    now[0] += 0.5
    kube.list_balloon_pods("ns", "uid-1")
    assert server.seen[-1]["headers"]["authorization"] == "Bearer token-1"
    now[0] += 0.5
    kube.list_balloon_pods("ns", "uid-1")
    now[0] += 0.5
    kube.list_balloon_pods("ns", "uid-1")
    assert [s["headers"]["authorization"] for s in server.seen[-2:]] == ["Bearer token-2"] * 2
    assert refreshed == ["Bearer token-1", "Bearer token-2"]
