"""What each part of an image weighs: its layers, the base's largest folders, and the Python
environment (/opt/venv) by distribution, read from a docker-archive (`buildah push IMAGE
docker-archive:FILE`, `docker save`, or the e2e lab's cached image).

    python -m release.weigh ~/.cache/tekton-coscheduler/images/tekton-coscheduler-e2e-*.tar

Sizes are uncompressed, as a node's disk holds them. A distribution's files are those its
dist-info RECORD lists that the layer holds (kubernetes/aio, deleted by the Dockerfile, is not
counted), and the files in the folder of a package it installed that RECORD does not list (the
Kubernetes client's byte code, compiled by the Dockerfile in place of its sources).
"""

from __future__ import annotations

import argparse
import csv
import json
import tarfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath

MIB = 2**20
SITE = "opt/venv/lib/"


def layers(archive: Path) -> Iterator[tuple[str, tarfile.TarFile]]:
    """Each layer of the archive's one image, bottom first, as an open tar."""
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        for name in manifest[0]["Layers"]:
            blob = outer.extractfile(name)
            assert blob is not None
            with tarfile.open(fileobj=blob) as layer:  # read in place: layers are large
                yield name, layer


def folder(path: str, depth: int) -> str:
    parts = PurePosixPath(path.lstrip("./")).parts
    return "/" + "/".join(parts[:depth])


def by_distribution(layer: tarfile.TarFile) -> Counter[str]:
    """Bytes of the layer's site-packages, by the distribution whose RECORD names each file."""
    members = [m for m in layer.getmembers() if m.isfile() and SITE in m.name]
    owner: dict[str, str] = {}
    packages: dict[str, str] = {}  # site-packages/<top folder> -> the distribution that has it
    for m in members:
        if m.name.endswith(".dist-info/RECORD"):
            site = m.name.rsplit("/", 2)[0]
            dist = m.name.rsplit("/", 2)[1].split("-")[0].lower().replace("_", "-")
            text = layer.extractfile(m).read().decode()  # type: ignore[union-attr]
            for row in csv.reader(text.splitlines()):
                if row:
                    owner[f"{site}/{row[0]}"] = dist
                    top, sep, _ = row[0].partition("/")
                    if sep and top != ".." and not top.endswith(".dist-info"):
                        packages[f"{site}/{top}"] = dist
    sizes: Counter[str] = Counter()
    for m in members:
        if "/site-packages/" in m.name:
            # A file its RECORD does not list inside a distribution's package folder is that
            # distribution's still: byte code compiled after the install (compileall -b).
            site, _, rest = m.name.partition("/site-packages/")
            top = f"{site}/site-packages/{rest.split('/')[0]}" if "/" in rest else ""
            sizes[owner.get(m.name) or packages.get(top, "(no RECORD names it)")] += m.size
    return sizes


def kind(path: str) -> str:
    """What a file of site-packages is: a source, its byte code, a compiled extension."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith(".py"):
        return ".py"
    if name.endswith(".pyc"):
        return ".pyc"
    return ".so" if ".so" in name else "other"


def by_kind(layer: tarfile.TarFile, under: str = "/site-packages/") -> Counter[str]:
    return Counter({k: sum(m.size for m in layer.getmembers()
                           if m.isfile() and under in m.name and kind(m.name) == k)
                    for k in (".py", ".pyc", ".so", "other")})


def report(archive: Path, top: int = 25) -> str:
    lines = [f"# {archive.name}", "", "| layer | MiB | largest folders (MiB) |", "|---|---:|---|"]
    venv: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    kube: Counter[str] = Counter()
    total = 0
    for name, layer in layers(archive):
        files = [m for m in layer.getmembers() if m.isfile()]
        size = sum(m.size for m in files)
        total += size
        folders: Counter[str] = Counter()
        for m in files:
            depth = 3 if m.name.lstrip("./").startswith(("usr/lib/", "usr/local/lib/")) else 2
            folders[folder(m.name, depth)] += m.size
        biggest = ", ".join(f"{f} {s / MIB:.1f}" for f, s in folders.most_common(8))
        lines.append(f"| {name[:19]} | {size / MIB:.1f} | {biggest} |")
        venv += by_distribution(layer)
        kinds += by_kind(layer)
        kube += by_kind(layer, "/site-packages/kubernetes/")
    lines += ["", f"total: {total / MIB:.1f} MiB", "",
              f"/opt/venv site-packages, {sum(venv.values()) / MIB:.1f} MiB:", "",
              "| distribution | MiB |", "|---|---:|"]
    lines += [f"| {d} | {s / MIB:.1f} |" for d, s in venv.most_common(top)]
    rest = sum(s for _, s in venv.most_common()[top:])
    if rest:
        lines.append(f"| (the {len(venv) - top} others) | {rest / MIB:.1f} |")
    for what, counts in (("site-packages", kinds), ("of which kubernetes", kube)):
        lines.append(f"\n{what}: " + ", ".join(f"{k} {s / MIB:.1f} MiB"
                                               for k, s in counts.items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m release.weigh",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("archive", type=Path, help="a docker-archive of the image")
    p.add_argument("--top", type=int, default=25, help="distributions listed one by one")
    args = p.parse_args(argv)
    print(report(args.archive, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
