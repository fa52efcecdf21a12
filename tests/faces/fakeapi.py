"""An API server in memory, over HTTP on 127.0.0.1, for the commands a person runs (`check`,
`explain`): objects by path, collections listed with their label selectors, access reviews
answered by a rule, and any path made to fail with a status. A kubeconfig points at it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DROP = -1  # a status for `failing`: no answer at all, the connection closed
# (the review's spec) -> allowed?
Rule = Callable[[dict[str, Any]], bool]


class FakeApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object
        self.failing: dict[str, int] = {}  # path (or collection path) -> status
        self.reviews: list[dict[str, Any]] = []  # every access review's kind and spec
        self.allow: Rule = lambda spec: True
        self.put("/version", {"gitVersion": "v1.36.3"})
        api = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                url = urlsplit(self.path)
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size)) if size else None
                status, data = api.respond(self.command, url.path, parse_qs(url.query), body)
                if status == DROP:  # the connection closed without an answer
                    self.close_connection = True
                    return
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def put(self, path: str, obj: dict[str, Any]) -> None:
        self.objects[path] = obj

    def respond(self, method: str, path: str, query: dict[str, list[str]],
                body: Any) -> tuple[int, Any]:
        if path in self.failing:
            status = self.failing[path]
            return status, {"kind": "Status", "code": status,
                            "message": f'User "someone" cannot get {path} (faked)'}
        if method == "POST" and path.endswith("accessreviews"):
            kind = "SubjectAccessReview" if path.endswith("/subjectaccessreviews") else (
                "SelfSubjectAccessReview")
            self.reviews.append({"kind": kind, "spec": body["spec"]})
            return 201, {**body, "status": {"allowed": self.allow(body["spec"])}}
        if path in self.objects:
            return 200, self.objects[path]
        prefix = path.rstrip("/") + "/"
        listed = [o for p, o in self.objects.items()
                  if p.startswith(prefix) and "/" not in p[len(prefix):]]
        if listed or path.rsplit("/", 1)[-1] in LISTED:
            wanted = dict(s.split("=", 1) for s in (query.get("labelSelector") or [""])[0]
                          .split(",") if "=" in s)
            items = [o for o in listed if all(
                ((o.get("metadata") or {}).get("labels") or {}).get(k) == v
                for k, v in wanted.items())]
            return 200, {"items": items}
        return 404, {"kind": "Status", "code": 404, "message": f"{path} not found"}

    def kubeconfig(self, directory: Path, namespace: str | None = None,
                   others: dict[str, tuple[str, str]] | None = None) -> Path:
        """A kubeconfig whose current context ("here") is this server (at that namespace);
        `others`: more contexts, name -> (server, namespace)."""
        contexts = {"here": (self.url, namespace), **(others or {})}
        path = directory / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "here",
            "clusters": [{"name": n, "cluster": {"server": s}} for n, (s, _) in contexts.items()],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": n, "context": {"cluster": n, "user": "u",
                                                 **({"namespace": ns} if ns else {})}}
                         for n, (_, ns) in contexts.items()]}))
        return path


# The collections the commands list: a GET of one that holds nothing is an empty list, not 404.
LISTED = {"pods", "events", "namespaces", "deployments"}
