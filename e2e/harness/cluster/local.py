"""A real control plane as local processes: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (fake kubelets), all on 127.0.0.1, no containers."""

from __future__ import annotations

import ipaddress
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import yaml

from .handle import LOCAL_STORAGE_CLASS, ClusterHandle
from .kubeconfig import write_kubeconfig
from .pki import Pki, create_pki
from .processes import ManagedProcess, free_port, http_ok, wait_until
from .versions import find_binary

SERVICE_CIDR = "10.96.0.0/16"
# The `kubernetes` Service: the first address of the range (pods of real nodes reach it).
KUBERNETES_SERVICE_IP = str(ipaddress.ip_network(SERVICE_CIDR)[1])


class LocalCluster(ClusterHandle):
    """The control plane, started by start() or `with LocalCluster() as c:`.

    stop() kills exactly the process groups started here and may be called twice."""

    backend = "local"

    def __init__(
        self,
        run_dir: Path | None = None,
        *,
        start_timeout: float = 90.0,
        keep_run_dir: bool = True,
        address: str = "127.0.0.1",
    ) -> None:
        """`address`: where the API server listens and says it is (127.0.0.1; an address of
        the harness's own that the pods of real nodes reach too: realnode.py)."""
        self.address = address
        self.run_dir = run_dir or Path(tempfile.mkdtemp(prefix="tekton-coscheduler-e2e-"))
        super().__init__(self.run_dir / "logs")
        self.start_timeout = start_timeout
        self.keep_run_dir = keep_run_dir
        self.pki: Pki | None = None
        self.startup_seconds: float | None = None

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        t0 = time.monotonic()
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        ips = ("127.0.0.1",) if self.address == "127.0.0.1" else (
            "127.0.0.1", self.address, KUBERNETES_SERVICE_IP)
        self.pki = pki = create_pki(self.run_dir / "pki", ips)
        self.ca_path = pki.ca_cert
        etcd_url = self._start_etcd()
        self._start_apiserver(etcd_url, pki)
        self._start_controller_manager(pki)
        self._start_scheduler()
        self.start_kwok()
        self.ensure_storage_class(LOCAL_STORAGE_CLASS, default=True)
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        super().stop()
        if not self.keep_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        else:
            shutil.rmtree(self.run_dir / "etcd-data", ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        super().__enter__()
        return self

    def restart(self, name: str, grace: float = 10.0) -> float:
        """Stops a component of the control plane (SIGTERM, as a static pod's restart does,
        SIGKILL after `grace` seconds: a kube-apiserver holds its watches open until then) and
        starts it again with the same flags and port; returns once it is healthy, with the
        seconds it was away."""
        proc = next(p for p in self.processes if p.name == name)
        t0 = time.monotonic()
        proc.stop(grace)
        proc.start()
        wait_until(self._healthy[name], timeout=self.start_timeout, what=f"{name} healthy again",
                   process=proc)
        return time.monotonic() - t0

    # components --------------------------------------------------------------------------
    def _start_etcd(self) -> str:
        client_port, peer_port = free_port(), free_port()
        url, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        proc = self._spawn(
            "etcd",
            [
                str(find_binary("etcd")),
                "--name=e2e",
                f"--data-dir={self.run_dir / 'etcd-data'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=e2e={peer}",
                "--unsafe-no-fsync",  # throwaway data; fsync only slows tests down
                "--log-level=warn",
            ],
        )
        self._healthy[proc.name] = lambda: http_ok(f"{url}/health", expect=b'"health":"true"')
        wait_until(
            self._healthy[proc.name],
            timeout=self.start_timeout,
            what=f"etcd health at {url}",
            process=proc,
        )
        return url

    def _start_apiserver(self, etcd_url: str, pki: Pki) -> None:
        port = free_port()
        self.server = f"https://{self.address}:{port}"
        loopback = self.address == "127.0.0.1"
        proc = self._spawn(
            "kube-apiserver",
            [
                str(find_binary("kube-apiserver")),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={self.address}",
                f"--secure-port={port}",
                f"--advertise-address={self.address}",
                # A loopback advertise address is refused unless nothing reconciles endpoints;
                # another is the `kubernetes` Service's endpoint, for pods of real nodes.
                *(["--endpoint-reconciler-type=none"] if loopback else []),
                # A node is reached at its InternalIP, never by a name looked up in the
                # machine's DNS (a packet that would leave the machine).
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={pki.admin_cert}",
                f"--kubelet-client-key={pki.admin_key}",
                f"--cert-dir={self.run_dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                # Only so that the controller-manager and scheduler find the CA bundle they
                # look for (they log errors every second without it); nothing uses the headers.
                f"--requestheader-client-ca-file={pki.ca_cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                # What an administrator may add, e.g. MutatingAdmissionPolicy v1beta1 on 1.35:
                # --feature-gates=MutatingAdmissionPolicy=true
                # --runtime-config=admissionregistration.k8s.io/v1beta1=true
                *os.environ.get("E2E_APISERVER_FLAGS", "").split(),
            ],
        )
        self.kubeconfig = write_kubeconfig(
            self.run_dir / "admin.kubeconfig",
            server=self.server,
            ca=pki.ca_cert,
            client_cert=pki.admin_cert,
            client_key=pki.admin_key,
        )
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        self._healthy[proc.name] = lambda: http_ok(f"{self.server}/readyz", ctx)
        wait_until(
            self._healthy[proc.name],
            timeout=self.start_timeout,
            what=f"kube-apiserver /readyz at {self.server}",
            process=proc,
        )

    def _serving_flags(self, name: str) -> tuple[list[str], str]:
        port = free_port()
        flags = [
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.run_dir / (name + '-certs')}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
        ]
        return flags, f"https://127.0.0.1:{port}/healthz"

    def _wait_healthz(self, proc: ManagedProcess, url: str) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving cert from --cert-dir
        self._healthy[proc.name] = lambda: http_ok(url, ctx)
        wait_until(
            self._healthy[proc.name],
            timeout=self.start_timeout,
            what=f"{proc.name} {url}",
            process=proc,
        )

    def _start_controller_manager(self, pki: Pki) -> None:
        flags, health = self._serving_flags("kube-controller-manager")
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(find_binary("kube-controller-manager")),
                f"--kubeconfig={self.kubeconfig}",
                *flags,
                "--leader-elect=false",
                f"--root-ca-file={pki.ca_cert}",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                # A node that stops renewing its Lease (kwok renews every 2 s) is NotReady after
                # 12 s, not the default 50: scenarios of lost nodes take seconds, not minutes.
                "--node-monitor-period=2s",
                "--node-monitor-grace-period=12s",
            ],
            restart_on_exit=True,
        )
        self._wait_healthz(proc, health)

    def _start_scheduler(self) -> None:
        config_path = self.run_dir / "kube-scheduler.yaml"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {
                        "kubeconfig": str(self.kubeconfig),
                        "qps": 100,
                        "burst": 200,
                    },
                    "leaderElection": {"leaderElect": False},
                }
            )
        )
        flags, health = self._serving_flags("kube-scheduler")
        proc = self._spawn(
            "kube-scheduler",
            [str(find_binary("kube-scheduler")), f"--config={config_path}", *flags],
            restart_on_exit=True,
        )
        self._wait_healthz(proc, health)

    # extras ------------------------------------------------------------------------------
    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        super().create_namespace(name, labels)
        # Pods are refused until the controller-manager has made the default ServiceAccount.
        with self._core() as core:
            self.wait_for(
                lambda: core.read_namespaced_service_account("default", name),
                timeout=30,
                what=f"ServiceAccount default in namespace {name}",
            )
        return name
