# One entry point for people and CI. Everything installs from this repository's own files:
# a virtualenv from pyproject.toml, the control-plane binaries from their Go modules
# (e2e/build.sh, cached outside the repository).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_FLAGS ?=

.PHONY: venv lint unit binaries e2e package lock release test demo demo-real bench bench-scale bench-chaos bench-capacity bench-rollout fuzz compare-faults compare-warm e2e-matrix clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/.installed

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest tests -p no:cacheprovider $(PYTEST_FLAGS)

binaries:
	bash e2e/build.sh

E2E_PYTEST = $(BIN)/pytest e2e -p no:cacheprovider --durations=40 $(PYTEST_FLAGS)
# The test command fails on a skipped scenario (it proved nothing) but those of these files:
# the kind backend's install needs Docker, which this lab does not have.
SKIPS_ALLOWED ?= test_kind_install.py

e2e: venv binaries
	$(E2E_PYTEST)

# As a new user would: `pip install .` into a clean virtualenv, then the CLI with no cluster.
package:
	rm -rf build/package-venv
	$(PYTHON) -m venv build/package-venv
	build/package-venv/bin/pip install --quiet .
	build/package-venv/bin/tekton-coscheduler --help >/dev/null
	build/package-venv/bin/tekton-coscheduler version
	build/package-venv/bin/kubectl-coscheduler version  # the kubectl plugin: `kubectl coscheduler`
	! KUBECONFIG=/nonexistent build/package-venv/bin/tekton-coscheduler check > build/check.out 2>&1
	grep -q "verdict: NOT READY" build/check.out
	! grep -q Traceback build/check.out
	@echo "package: pip install . works; check without a cluster gives a verdict, not a traceback"

# requirements.lock: pyproject.toml's runtime dependencies and theirs, pinned with the hashes of
# their files; the image installs it and nothing else (pip --require-hashes). Run after changing
# the dependencies; newer releases of everything: make lock LOCK_FLAGS=--upgrade. The image runs
# Python 3.13 (distroless's, Debian 13's): the lock is resolved with the virtualenv's Python, which
# must be 3.13 too: make lock PYTHON=python3.13 VENV=.venv-3.13.
LOCK_FLAGS ?=
lock: venv
	$(BIN)/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13) and "lock: the venv must be Python 3.13, as the image")'
	$(BIN)/pip install --quiet -e '.[test,release]'
	CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet --generate-hashes \
		--strip-extras --no-emit-index-url --no-emit-find-links $(LOCK_FLAGS) \
		--output-file requirements.lock pyproject.toml

# make release VERSION=x.y.z REGISTRY=host[:port][/path]: the image (OCI labels, its SBOM in
# dist/) and the chart (an OCI artifact), built and pushed to REGISTRY (release/__main__.py).
# VERSION must be the project's (controller/__init__.py). Log in first with the tools' own
# `buildah login` (or docker's) and `helm registry login`. Steps only: RELEASE_FLAGS=--dry-run
RELEASE_FLAGS ?=
release: venv
	@test -n "$(VERSION)" -a -n "$(REGISTRY)" || { echo "usage: make release VERSION=x.y.z REGISTRY=host[:port][/path]"; exit 2; }
	$(BIN)/pip install --quiet -e '.[test,release]'
	$(BIN)/python -m release --version "$(VERSION)" --registry "$(REGISTRY)" $(RELEASE_FLAGS)

# The test command of the README and of CI. The parts build in the background, at the lowest CPU
# and I/O priority, while lint, the unit tests and the scenarios run: the scenarios come in the
# order the parts are built, and one whose part is not built yet waits for it
# (e2e/harness/cluster/building.py). It fails if the build did; a failure stops the build.
test: venv
	bash e2e/build.sh --background
	$(MAKE) lint unit package || { bash e2e/build.sh --stop; exit 1; }
	$(E2E_PYTEST) -rs --skips-allowed $(SKIPS_ALLOWED) \
		|| { bash e2e/build.sh --stop; exit 1; }
	bash e2e/build.sh --wait

# The main job: a local control plane, the operator, a fan-out/fan-in PipelineRun, a verdict.
demo: venv
	bash e2e/build.sh etcd kubernetes kwok tekton helm
	$(BIN)/python -m e2e.tools.demo

# The same on two real nodes (root; containerd, runc, kubelet): the chart's operator from the
# image our Dockerfile builds, real steps writing and reading a real volume, a real balloon.
demo-real: venv
	bash e2e/build.sh etcd kubernetes kwok tekton helm realnode
	$(BIN)/python -m e2e.tools.demo_real

bench: venv
	bash e2e/build.sh etcd kubernetes kwok helm
	$(BIN)/python -m bench.admission
	$(BIN)/python -m bench.pod_churn
	$(BIN)/python -m bench.intake_floor
	$(BIN)/python -m bench.admission_modes
	$(BIN)/python -m bench.admission_parity
	$(BIN)/python -m bench.webhook_under_load
	$(BIN)/python -m bench.client_calls

# R concurrent runs on N nodes with F finished runs kept: ours, none, Tekton's assistant
# (not part of CI). Smaller: make bench-scale SCALE_FLAGS="--runs 100 --nodes 20 --finished 500"
# Namespaces: SCALE_FLAGS="--runs 40 --namespaces 40 --enabled 1000 --modes tekton-coscheduler none"
SCALE_FLAGS ?=
bench-scale: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	bash e2e/build.sh etcd kubernetes kwok tekton
	$(BIN)/python -m bench.scale $(SCALE_FLAGS)

# R runs while the leader is killed every 20 s, the API server and the controller-manager are
# restarted and an anchor node is cordoned (not part of CI; about 15 minutes; CI runs a short
# version, e2e/tests/test_chaos.py). Smaller: make bench-chaos CHAOS_FLAGS="--runs 60 --seconds 120"
CHAOS_FLAGS ?=
bench-chaos: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	bash e2e/build.sh etcd kubernetes kwok tekton helm
	$(BIN)/python -m bench.chaos $(CHAOS_FLAGS)

# Capacity-aware anchoring on busy nodes, four ways in one invocation, with Karpenter adding
# nodes (not part of CI; the e2e versions are e2e/tests/test_capacity.py and test_autoscaler.py).
# Smaller: make bench-capacity CAPACITY_FLAGS="--autoscaler --runs 8"; no autoscaler: CAPACITY_FLAGS=
CAPACITY_FLAGS ?= --autoscaler
bench-capacity: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	bash e2e/build.sh etcd kubernetes kwok tekton karpenter
	$(BIN)/python -m bench.capacity $(CAPACITY_FLAGS)

# Pod creations refused while the webhook's replicas are rolled: the real-Service rollout on real
# nodes (root) and the kwok rollouts, N times each beside two CPU hogs (not part of CI; about 3
# minutes a real-node rollout). Smaller: make bench-rollout ROLLOUT_FLAGS="--count 5 --which kwok"
ROLLOUT_FLAGS ?=
bench-rollout: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	bash e2e/build.sh etcd kubernetes kwok tekton helm realnode
	$(BIN)/python -m bench.rollout $(ROLLOUT_FLAGS)

# Nodes that go away, with ours and with Tekton's assistant (not part of CI; about 15 minutes).
# The core e2e subset (pytest -m matrix) on every Kubernetes minor and Tekton LTS line of
# e2e/versions.env (not part of CI; it builds each release first). Fewer cells:
# make e2e-matrix MATRIX_FLAGS="--plan reduced"
MATRIX_FLAGS ?=
e2e-matrix: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m e2e.tools.matrix $(MATRIX_FLAGS)

# Where a run starts fastest, on two real nodes (root): ours with warm anchors, ours without,
# Tekton's assistant, none; a large step image on one node, and a pipeline's node-local cache
# (not part of CI; about 25 minutes). Smaller: make compare-warm WARM_FLAGS="--runs 6"
WARM_FLAGS ?=
compare-warm: venv
	$(BIN)/pip install --quiet -e '.[test,bench]'
	bash e2e/build.sh etcd kubernetes kwok tekton helm realnode
	$(BIN)/python -m e2e.tools.compare_warm $(WARM_FLAGS)

compare-faults: venv
	bash e2e/build.sh etcd kubernetes kwok tekton
	$(BIN)/python -m e2e.tools.compare_faults

# A million admission requests through the webhook's answer (tests/fuzz); not part of CI, which
# runs a few thousand (tests/faces/test_admission_fuzz.py). About 6 minutes on two cores.
fuzz: venv
	$(BIN)/python -m tests.fuzz --requests 1000000

clean:
	rm -rf $(VENV) build *.egg-info
