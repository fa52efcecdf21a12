"""The webhook over real HTTPS: requests shaped like the API server's, and bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import kubernetes_validate
import pytest
import trustme
from aiohttp import web

from controller.faces import probes, webhook
from controller.metrics import Metrics
from tests import factories
from tests.conftest import StaticFacts


@dataclass
class Server:
    url: str
    ca: trustme.CA
    tls: webhook.ReloadingTLS
    metrics: Metrics
    facts: StaticFacts
    cert_dir: Path
    metrics_url: str
    draining: list[bool]

    def client_ssl(self, ca: trustme.CA | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        (ca or self.ca).configure_trust(ctx)
        return ctx

    async def post(self, body: bytes, **kw: Any) -> aiohttp.ClientResponse:
        async with aiohttp.ClientSession() as session:
            resp = await session.post(self.url, data=body, ssl=self.client_ssl(), **kw)
            await resp.read()
            return resp

    async def review(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
        resp = await self.post(json.dumps(factories.admission_review(obj, **kw)).encode(),
                               headers={"Content-Type": "application/json"})
        assert resp.status == 200, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


def write_cert(ca: trustme.CA, directory: Path) -> tuple[Path, Path]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    for pem in cert.cert_chain_pems[1:]:
        pem.write_to_path(str(cert_path), append=True)
    cert.private_key_pem.write_to_path(str(key_path))
    return cert_path, key_path


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    ca = trustme.CA()
    cert, key = write_cert(ca, tmp_path)
    tls = webhook.ReloadingTLS(cert, key)
    metrics, facts, draining = Metrics(), StaticFacts(), [False]
    runner = web.AppRunner(
        webhook.make_app(lambda: facts, metrics, lambda: draining[0]), access_log=None
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    port = runner.addresses[0][1]
    mrunner = web.AppRunner(probes.metrics_app(metrics))
    await mrunner.setup()
    msite = web.TCPSite(mrunner, "127.0.0.1", 0)
    await msite.start()
    mport = mrunner.addresses[0][1]
    yield Server(f"https://127.0.0.1:{port}{webhook.PATH}", ca, tls, metrics, facts, tmp_path,
                 f"http://127.0.0.1:{mport}/metrics", draining)
    await runner.cleanup()
    await mrunner.cleanup()


def patched_pod(pod: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    result: dict[str, Any] = jsonpatch.apply_patch(pod, patch)
    return result


async def test_tekton_pod_is_tied_to_its_balloon(server: Server) -> None:
    pod = factories.taskrun_pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}]}})
    answer = await server.review(pod, uid="abc")
    assert answer["response"]["uid"] == "abc" and answer["response"]["allowed"] is True
    out = patched_pod(pod, answer)
    kubernetes_validate.validate(out, "1.36", strict=True)
    assert out["spec"]["affinity"]["podAntiAffinity"] == pod["spec"]["affinity"]["podAntiAffinity"]
    assert len(out["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]) == 1


async def test_bad_input_gets_a_clear_answer_and_the_server_keeps_serving(server: Server) -> None:
    bad = [
        (b"{nope", 400, "not JSON"),
        (b"", 400, "not JSON"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}).encode(), 400,
         "request is missing"),
        (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
                     "request": {"uid": 5}}).encode(), 400, "request.uid"),
    ]
    for body, status, says in bad:
        resp = await server.post(body)
        assert resp.status == status
        assert says in (await resp.json())["error"]
    # Missing fields inside a request with a uid: allowed, unpatched.
    review = factories.admission_review(factories.taskrun_pod())
    del review["request"]["object"]
    resp = await server.post(json.dumps(review).encode())
    assert resp.status == 200 and "patch" not in (await resp.json())["response"]
    # And a good request still works afterwards.
    assert "patch" in (await server.review(factories.taskrun_pod()))["response"]


async def test_oversized_body_is_refused_and_the_server_keeps_serving(server: Server) -> None:
    pod = factories.taskrun_pod()
    pod["metadata"]["annotations"]["huge"] = "x" * (webhook.MAX_BODY + 1)
    resp = await server.post(json.dumps(factories.admission_review(pod)).encode())
    assert resp.status == 413
    assert "patch" in (await server.review(factories.taskrun_pod()))["response"]


async def test_large_but_legal_pod_is_answered(server: Server) -> None:
    pod = factories.taskrun_pod()
    pod["metadata"]["annotations"]["big"] = "x" * (1024 * 1024)
    assert "patch" in (await server.review(pod))["response"]


async def test_wrong_kind_and_other_namespaces_are_allowed_unpatched(server: Server) -> None:
    answer = await server.review(factories.taskrun_pod(), kind="Secret")
    assert answer["response"] == {"uid": answer["response"]["uid"], "allowed": True}
    answer = await server.review(factories.taskrun_pod(namespace="elsewhere"))
    assert "patch" not in answer["response"]


async def test_label_values_at_their_limits(server: Server) -> None:
    name = "r" * 63
    pod = factories.taskrun_pod(run=name, run_uid=None, task="t")
    pod["metadata"]["labels"]["tekton.dev/taskRun"] = "t" * 63
    out = patched_pod(pod, await server.review(pod))
    kubernetes_validate.validate(out, "1.36", strict=True)
    too_long = factories.taskrun_pod(run="r" * 64, run_uid=None)
    assert "patch" not in (await server.review(too_long))["response"]


async def test_only_post_on_the_configured_path(server: Server) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(server.url, ssl=server.client_ssl()) as resp:
            assert resp.status == 405
        async with session.post(server.url.replace(webhook.PATH, "/"), data=b"{}",
                                ssl=server.client_ssl()) as resp:
            assert resp.status == 404


async def test_concurrent_requests(server: Server) -> None:
    answers = await asyncio.gather(*(server.review(factories.taskrun_pod(task=f"t{i}")) for i in range(100)))
    assert all("patch" in a["response"] for a in answers)


async def test_metrics_count_outcomes(server: Server) -> None:
    await server.review(factories.taskrun_pod())
    await server.review(factories.taskrun_pod(namespace="elsewhere"))
    await server.post(b"junk")
    async with aiohttp.ClientSession() as session, session.get(server.metrics_url) as resp:
        text = await resp.text()
    assert 'tekton_coscheduler_admissions_total{outcome="patched"} 1.0' in text
    assert 'tekton_coscheduler_admissions_total{outcome="namespace-disabled"} 1.0' in text
    assert 'tekton_coscheduler_admissions_total{outcome="malformed"} 1.0' in text
    assert "tekton_coscheduler_admission_duration_seconds_count 3.0" in text


async def test_rotated_certificate_is_served_without_restart(server: Server) -> None:
    new_ca = trustme.CA()
    # Files written later than the first pair; force a distinct mtime on coarse filesystems.
    cert, _ = write_cert(new_ca, server.cert_dir)
    stamp = os.stat(cert).st_mtime + 5
    os.utime(cert, (stamp, stamp))
    assert server.tls.reload_if_changed()
    async with aiohttp.ClientSession() as session:
        body = json.dumps(factories.admission_review(factories.taskrun_pod())).encode()
        async with session.post(server.url, data=body, ssl=server.client_ssl(new_ca)) as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.post(server.url, data=body, ssl=server.client_ssl(server.ca))
    assert not server.tls.reload_if_changed()


async def test_half_written_certificate_keeps_the_old_one(server: Server) -> None:
    cert = server.cert_dir / "tls.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\ntruncated")
    stamp = os.stat(cert).st_mtime + 5
    os.utime(cert, (stamp, stamp))
    assert not server.tls.reload_if_changed()
    assert "patch" in (await server.review(factories.taskrun_pod()))["response"]


def test_a_kubelet_style_swap_is_noticed_even_with_the_same_mtimes(tmp_path: Path) -> None:
    """A secret volume is updated by repointing the `..data` symlink at a new directory; the
    new files can carry the same mtime as the old ones (copied, or one coarse clock tick)."""

    def generation(name: str, ca: trustme.CA) -> Path:
        directory = tmp_path / name
        directory.mkdir()
        write_cert(ca, directory)
        for f in directory.iterdir():
            os.utime(f, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        return directory

    old_ca, new_ca = trustme.CA(), trustme.CA()
    (tmp_path / "..data").symlink_to(generation("..1", old_ca).name)
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).symlink_to(Path("..data") / name)
    tls = webhook.ReloadingTLS(tmp_path / "tls.crt", tmp_path / "tls.key")
    staged = tmp_path / "..data_tmp"
    staged.symlink_to(generation("..2", new_ca).name)
    os.replace(staged, tmp_path / "..data")
    assert tls.reload_if_changed()
    assert not tls.reload_if_changed()


async def test_while_draining_it_still_answers_but_closes_kept_alive_connections(
    server: Server,
) -> None:
    """A replica told to stop keeps answering (a refused call would fail the pod, and Tekton
    the TaskRun), but ends each connection after the answer, so the API server's next call
    opens a new one, which endpoints send to a replica that stays."""
    body = json.dumps(factories.admission_review(factories.taskrun_pod())).encode()
    async with aiohttp.ClientSession() as session:
        async with session.post(server.url, data=body, ssl=server.client_ssl()) as resp:
            assert resp.status == 200 and resp.headers.get("Connection", "").lower() != "close"
        server.draining[0] = True
        async with session.post(server.url, data=body, ssl=server.client_ssl()) as resp:
            assert resp.status == 200 and "patch" in (await resp.json())["response"]
            assert resp.headers.get("Connection", "").lower() == "close"


def test_the_servers_metrics_and_the_reconcilers_are_one_exposition_prometheus_accepts() -> None:
    """Both processes define every family; side by side, each would be named twice, which a
    Prometheus scrape refuses. Merged, each family comes once, its series labelled by process."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    server, reconciler = Metrics(), Metrics()
    server.admissions.labels(outcome="patched").inc(3)
    reconciler.balloons_created.inc(2)
    reconciler.api_requests.labels(verb="create", resource="statefulsets", code="201").inc()
    text = probes.merged(server.registry, generate_latest(reconciler.registry).decode()).decode()
    names = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")]
    assert len(names) == len(set(names)), "a family named twice"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("tekton_coscheduler_admissions_total",
                    (("outcome", "patched"), ("process", "server")))] == 3
    assert samples[("tekton_coscheduler_balloons_created_total", (("process", "reconciler"),))] == 2
