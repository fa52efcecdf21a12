"""Tekton's remote resolution in the suite: a resolver answered from memory.

Tekton's controller makes a ResolutionRequest for each remote pipelineRef and taskRef of a run
and waits for a resolver to write the fetched object into its `status.data` (base64); Tekton's
own ResolutionRequest reconciler then marks it succeeded. No resolvers deployment runs here (no
git server, no registry), so this does what one would, for the requests labelled with its name:
it answers from the objects `remote()` took out of a run, by params, the way the git resolver
answers by url and path.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import threading
from collections.abc import Mapping
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e.harness.cluster.api import ClusterApi

GROUP, VERSION, PLURAL = "resolution.tekton.dev", "v1beta1", "resolutionrequests"
NAME = "e2e"  # the resolver's name, as taskRef.resolver gives it


class Resolver:
    """Serves the objects it holds to the ResolutionRequests of one namespace while in `with`."""

    def __init__(self, cluster: ClusterApi, namespace: str, delay: float = 0.0) -> None:
        self.cluster, self.ns, self.delay = cluster, namespace, delay
        self.objects: dict[str, dict[str, Any]] = {}  # path -> object
        self.answered: set[str] = set()  # request names
        self.errors: list[str] = []  # what the API server refused, for a failing test to show
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="e2e-resolver", daemon=True)

    def __enter__(self) -> Resolver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def ref(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Holds the object at `path`; the reference that resolves to it."""
        self.objects[path] = copy.deepcopy(dict(obj))
        return {"resolver": NAME, "params": [{"name": "pathInRepo", "value": path}]}

    def remote(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """The run with its embedded pipeline, and each task's embedded spec, moved behind the
        resolver: tasks with the same spec share one Task, as a catalog's would."""
        out = copy.deepcopy(dict(run))
        pipeline = out["spec"].pop("pipelineSpec")
        by_spec: dict[str, str] = {}
        for task in [*pipeline.get("tasks", []), *pipeline.get("finally", [])]:
            spec = task.pop("taskSpec")
            key = json.dumps(spec, sort_keys=True)
            path = by_spec.setdefault(key, f"task/{task['name']}.yaml")
            task["taskRef"] = self.ref(path, _object("Task", task["name"], spec))
        out["spec"]["pipelineRef"] = self.ref(
            "pipeline.yaml", _object("Pipeline", "e2e-pipeline", pipeline)
        )
        return out

    def _serve(self) -> None:
        with self.cluster.api_client() as api:
            custom = client.CustomObjectsApi(api)
            while not self._stop.wait(0.2):
                listed = cast(dict[str, Any], custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.ns, PLURAL,
                    label_selector=f"resolution.tekton.dev/type={NAME}",
                ))
                for request in listed.get("items") or []:
                    try:
                        self._answer(custom, request)
                    except ApiException as exc:  # answered on the next round
                        self.errors.append(f"{exc.status} {exc.reason}: {exc.body}")

    def _answer(self, custom: client.CustomObjectsApi, request: Mapping[str, Any]) -> None:
        name = request["metadata"]["name"]
        if name in self.answered or (request.get("status") or {}).get("data"):
            return
        params = {p["name"]: p["value"] for p in request["spec"].get("params") or []}
        obj = self.objects.get(str(params.get("pathInRepo")))
        if obj is None:
            return  # not ours to answer: Tekton fails it after its timeout
        if self.delay:
            self._stop.wait(self.delay)
        raw = json.dumps(obj).encode()
        # What a resolver writes (the CRD requires all three): the object, and where it came
        # from, as provenance.
        origin = {"uri": f"{NAME}://{params.get('pathInRepo')}",
                  "digest": {"sha256": hashlib.sha256(raw).hexdigest()},
                  "entryPoint": str(params.get("pathInRepo"))}
        status = {"data": base64.b64encode(raw).decode(), "refSource": origin, "source": origin}
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.ns, PLURAL, name, {"status": status}
        )
        self.answered.add(name)


def _object(kind: str, name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "tekton.dev/v1", "kind": kind, "metadata": {"name": name},
            "spec": dict(spec)}
