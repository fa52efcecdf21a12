"""OCI image archives made from files on this machine, which the real-node lab pushes into its
registry (registry.py): no Docker. Standard library only, so that e2e/build.sh can run it with
the system's python3 before any virtualenv exists:

    python3 e2e/harness/cluster/images.py NAME OUT.tar [--entrypoint PATH] [--user UID]
        [--env K=V ...] FILE=PATH_IN_IMAGE ... [--busybox BUSYBOX]

Each FILE is copied to PATH_IN_IMAGE (mode kept); --busybox adds a busybox binary as
/bin/busybox with a link in /bin for every applet it lists.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

LAYER = "application/vnd.oci.image.layer.v1.tar"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"


def _info(name: str, **kw: Any) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name.lstrip("/"))
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    for key, value in kw.items():
        setattr(info, key, value)
    return info


def layer(files: Mapping[str, Path], links: Mapping[str, str] | None = None,
          dirs: Sequence[str] = ()) -> bytes:
    """An uncompressed layer: each file at its path in the image (mode kept), symlinks, and
    empty directories (mode 1777 for /tmp), with every parent directory."""
    out = io.BytesIO()
    write_layer(out, files, links, dirs)
    return out.getvalue()


def write_layer(out: IO[bytes], files: Mapping[str, Path], links: Mapping[str, str] | None = None,
                dirs: Sequence[str] = ()) -> None:
    """layer(), written to `out` as it goes (files of any size)."""
    made: set[str] = set()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def parents(path: str) -> None:
            parts = path.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in made:
                    made.add(d)
                    tar.addfile(_info(d, type=tarfile.DIRTYPE, mode=0o755))

        for d in dirs:
            parents(d + "/x")
            mode = 0o1777 if d.strip("/") == "tmp" else 0o755
            if d.strip("/") in made:
                continue
            made.add(d.strip("/"))
            tar.addfile(_info(d, type=tarfile.DIRTYPE, mode=mode))
        for target, source in sorted(files.items()):
            parents(target)
            stat = Path(source).stat()
            with open(source, "rb") as data:
                tar.addfile(_info(target, size=stat.st_size, mode=stat.st_mode & 0o7777), data)
        for target, points_to in sorted((links or {}).items()):
            parents(target)
            tar.addfile(_info(target, type=tarfile.SYMTYPE, linkname=points_to, mode=0o777))


def _digest(data: bytes | Path) -> str:
    if isinstance(data, bytes):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    with open(data, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _blob(tar: tarfile.TarFile, data: bytes | Path) -> dict[str, Any]:
    digest = _digest(data)
    size = len(data) if isinstance(data, bytes) else data.stat().st_size
    info = _info(f"blobs/sha256/{digest}", size=size, mode=0o644)
    if isinstance(data, bytes):
        tar.addfile(info, io.BytesIO(data))
    else:
        with open(data, "rb") as f:
            tar.addfile(info, f)
    return {"digest": f"sha256:{digest}", "size": size}


def write(out: Path, name: str, layers: Sequence[bytes | Path],
          config: Mapping[str, Any]) -> str:
    """The OCI image layout as a tar (skopeo's oci-archive, `ctr images import`), named
    `name`; each layer is its uncompressed tar, in memory or a file. Returns the manifest's
    digest."""
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_digest(x)}" for x in layers]},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        layout = json.dumps({"imageLayoutVersion": "1.0.0"}).encode()
        tar.addfile(_info("oci-layout", size=len(layout), mode=0o644), io.BytesIO(layout))
        tar.addfile(_info("blobs", type=tarfile.DIRTYPE, mode=0o755))
        tar.addfile(_info("blobs/sha256", type=tarfile.DIRTYPE, mode=0o755))
        config_desc = {"mediaType": CONFIG, **_blob(tar, json.dumps(image_config).encode())}
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": config_desc,
            "layers": [{"mediaType": LAYER, **_blob(tar, x)} for x in layers],
        }
        manifest_desc = {"mediaType": MANIFEST, **_blob(tar, json.dumps(manifest).encode()),
                         "platform": {"architecture": "amd64", "os": "linux"},
                         "annotations": {"io.containerd.image.name": name,
                                         "org.opencontainers.image.ref.name": name}}
        index = json.dumps({"schemaVersion": 2, "mediaType": INDEX,
                            "manifests": [manifest_desc]}).encode()
        tar.addfile(_info("index.json", size=len(index), mode=0o644), io.BytesIO(index))
    return str(manifest_desc["digest"])


def busybox_links(busybox: Path) -> dict[str, str]:
    """/bin/<applet> -> busybox, for every applet the binary lists."""
    listed = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True)
    return {f"/bin/{a}": "busybox" for a in listed.stdout.split() if a and a != "busybox"}


def large(out: Path, name: str, megabytes: int, busybox: Path) -> None:
    """An image of busybox (one layer) and `megabytes` MB of random bytes in /data (another):
    data no compression shrinks, so that pulling it costs its size, as big toolchain images
    do. Built beside `out` in a temporary directory, as it goes (never whole in memory)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="large-image-", dir=out.parent))
    try:
        data = work / "random"
        with open(data, "wb") as f:
            for _ in range(megabytes):
                f.write(os.urandom(1 << 20))
        base, big = work / "busybox.tar", work / "data.tar"
        with open(base, "wb") as f:
            write_layer(f, {"/bin/busybox": busybox}, busybox_links(busybox), dirs=["/tmp"])
        with open(big, "wb") as f:
            write_layer(f, {"/data/random": data})
        data.unlink()
        partial = work / "image.tar"
        write(partial, name, [base, big], {"Env": ["PATH=/bin"], "Entrypoint": ["/bin/sh"]})
        partial.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name")
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="*", help="FILE=PATH_IN_IMAGE")
    parser.add_argument("--entrypoint")
    parser.add_argument("--user")
    parser.add_argument("--env", action="append", default=[])
    parser.add_argument("--busybox", type=Path)
    args = parser.parse_args(argv)
    files = {}
    for spec in args.files:
        source, _, target = spec.partition("=")
        files[target] = Path(source)
    links: dict[str, str] = {}
    if args.busybox:
        files["/bin/busybox"] = args.busybox
        links = busybox_links(args.busybox)
    config: dict[str, Any] = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/ko-app", *args.env]}
    if args.entrypoint:
        config["Entrypoint"] = [args.entrypoint]
    if args.user:
        config["User"] = args.user
    digest = write(args.out, args.name, [layer(files, links, dirs=["/tmp"])], config)
    print(f"{args.name} {digest} {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
