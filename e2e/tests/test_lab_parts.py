"""The real-node lab's pure parts, without a cluster: how nodes are told where to pull, what the
kubelet's pull Events say, the large image's layout."""

from __future__ import annotations

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from e2e.harness.cluster import images, realconfig, realimages, realpulls
from e2e.harness.cluster.registry import repository


def test_every_registry_the_lab_serves_goes_to_it_and_every_other_to_a_closed_port() -> None:
    hosts = realconfig.hosts("10.87.0.1:5000", Path("/lab/ca.crt"))
    assert set(hosts) == {"_default", *realimages.REGISTRIES}
    for registry in realimages.REGISTRIES:
        config = tomllib.loads(hosts[registry])
        # The server is the only host: no [host] entry, so nothing falls back to the real one.
        assert config == {"server": f"https://10.87.0.1:5000/v2/{registry}",
                          "override_path": True, "capabilities": ["pull", "resolve"],
                          "ca": "/lab/ca.crt"}
    closed = tomllib.loads(hosts["_default"])
    assert closed["server"] == "https://127.0.0.1:9" and list(closed["host"]) == [closed["server"]]


def test_the_kubelet_s_pull_event_is_read_as_image_bytes_and_seconds() -> None:
    message = ('Successfully pulled image "e2e.tekton-coscheduler.dev/busybox:v1.15.0" in '
               "1m2.5s (1m3s including waiting). Image size: 1088207 bytes.")
    assert realpulls.parse(message, "real-0") == realpulls.Pulled(
        "e2e.tekton-coscheduler.dev/busybox:v1.15.0", 1088207, 62.5, "real-0")
    assert realpulls.parse('Container image "x" already present on machine', "real-0") is None
    assert realpulls.go_duration("850.5ms") == pytest.approx(0.8505)
    assert realpulls.go_duration("12µs") == pytest.approx(12e-6)
    with pytest.raises(ValueError):
        realpulls.go_duration("1.5 s")


def test_a_name_is_its_repository_and_tag() -> None:
    assert repository("registry.k8s.io/pause:3.10") == ("registry.k8s.io/pause", "3.10")
    assert repository("10.87.0.1:5000/x/y:z") == ("10.87.0.1:5000/x/y", "z")
    with pytest.raises(ValueError):
        repository("10.87.0.1:5000/x")


def test_the_large_image_is_a_base_layer_and_its_random_megabytes(tmp_path: Path) -> None:
    busybox = tmp_path / "busybox"
    busybox.write_text("#!/bin/sh\nexit 0\n")  # any executable: --list prints no applet
    busybox.chmod(0o755)
    out = tmp_path / "large.tar"
    images.large(out, "e2e.tekton-coscheduler.dev/large:2m", 2, busybox)
    with tarfile.open(out) as tar:
        blob = {m.name.rsplit("/", 1)[-1]: m for m in tar.getmembers() if m.isfile()}

        def read(digest: str) -> bytes:
            data = tar.extractfile(blob[digest.removeprefix("sha256:")])
            assert data is not None
            return data.read()

        index = json.loads(read("index.json"))
        manifest = json.loads(read(index["manifests"][0]["digest"]))
        sizes = [layer["size"] for layer in manifest["layers"]]
        assert sizes[1] > 2 * 2**20 and sizes[0] < 64 * 2**10, sizes
        for layer in manifest["layers"]:
            assert hashlib.sha256(read(layer["digest"])).hexdigest() == layer["digest"][7:]
    assert {p.name for p in tmp_path.iterdir()} == {"busybox", "large.tar"}  # nothing left
