"""An API client that may only read: any write through it raises WriteRefused.

Wrap the client (or the in-memory fake the tests use) that a piece of code is given, to show
that the code never writes: `ReadOnly(kube)`. Reads are handed through unchanged; a write
method, a request by path that is no GET, or a call that tests/apisurface.py does not know
to be a read raises before it reaches the wrapped client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests import apisurface


class WriteRefused(AssertionError):
    """A write asked of a read-only client."""


class ReadOnly:
    def __init__(self, client: Any) -> None:
        object.__setattr__(self, "_client", client)

    def __getattr__(self, name: str) -> Any:
        client = object.__getattribute__(self, "_client")
        if name in apisurface.WRITES:
            return _refuse(name)
        if name in apisurface.BY_METHOD:
            return _checked(name, getattr(client, name))
        if name in apisurface.READS or name in apisurface.ATTRIBUTES or name.startswith("_"):
            return getattr(client, name)
        # Not known to be a read: perhaps a write added since. Classify it in
        # tests/apisurface.py to let it through.
        return _refuse(name, "is not known to be a read (tests/apisurface.py)")

    def __setattr__(self, name: str, value: Any) -> None:
        raise WriteRefused(f"{name}: a read-only client cannot be changed")


def _refuse(name: str, why: str = "writes") -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise WriteRefused(f"{name}{_shown(args, kwargs)} {why}: this client may only read")

    return refused


def _checked(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
    def checked(*args: Any, **kwargs: Any) -> Any:
        method, url_path = apisurface.method_and_path(args, kwargs)
        if apisurface.writes_by_method(method, url_path):
            raise WriteRefused(f"{name}({method} {url_path}) writes: this client may only read")
        return call(*args, **kwargs)

    return checked


def _shown(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    shown = [repr(a)[:60] for a in args] + [f"{k}={v!r}"[:60] for k, v in kwargs.items()]
    return f"({', '.join(shown)})"
