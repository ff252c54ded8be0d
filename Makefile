# The two commands: `make demo` and `make test`. Everything they need is provisioned by scripts/.
SHELL := /bin/bash
# Each checkout builds in its own target directory under the cache (scripts/target-dir.sh);
# .ci/run sets CI's shared one.
ifeq ($(CARGO_TARGET_DIR),)
export CARGO_TARGET_DIR := $(shell ./scripts/target-dir.sh)
endif

.PHONY: docs test demo unit lint fmt env-up env-down env-purge crds helm-template image bench-cascade bench-tenant bench-external bench-scan bench-capa

## make test: start the real servers, run unit + integration tests, stop the servers.
test:
	./scripts/test.sh

## make demo: the local kube-apiserver + LocalStack, then sweeper against them.
demo:
	./scripts/demo.sh

## make unit: the fast unit tests only, no servers.
unit:
	cargo test --workspace

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings

fmt:
	cargo fmt --all

env-up:
	./scripts/env-up.sh

env-down:
	./scripts/env-down.sh

env-purge:
	./scripts/env-down.sh --purge

## make docs: regenerate docs/configuration.md's flag reference from the CLI definitions.
docs:
	UPDATE_DOCS=1 cargo test --locked --test docs configuration_reference_is_up_to_date

## The chart's CRD templates (crds.capa, crds.clusterAPI, crds.kubezoo) are generated from
## `sweeper crds`: never edit them by hand. No plain CRD file ships under deploy/: the kinds are
## CAPA's, Cluster API's and KubeZoo's, and `kubectl apply -R -f deploy/` must not replace theirs.
crds:
	UPDATE_CHART_CRDS=1 cargo test --locked --test helm chart_crd_templates_are_deploy_crds_per_group

## make image: the release image, as .github/workflows/release.yml builds it (there for
## linux/amd64 and linux/arm64). IMAGE=registry/sweeper VERSION=x.y.z (default: the release's
## name, deploy/release.env, and Cargo.toml's version); PLATFORMS=linux/arm64 builds another
## architecture through docker buildx. Then load it into kind or push it (README, "Get sweeper").
VERSION ?= $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
IMAGE ?= $(shell sed -n 's/^SWEEPER_IMAGE=//p' deploy/release.env)
image:
	@if [ -n "$(PLATFORMS)" ]; then \
	  docker buildx build --platform "$(PLATFORMS)" --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -f Dockerfile --load . ; \
	else \
	  docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) -f Dockerfile . ; \
	fi

## make helm-template: `helm template sweeper deploy/helm/sweeper -n sweeper-system` with the pinned
## helm (scripts/provision-helm.sh builds it from helm.sh/helm/v3 on first use). ARGS='--set k=v --include-crds'.
helm-template:
	@bin="$$(./scripts/provision-helm.sh)" && "$$bin" template sweeper deploy/helm/sweeper --namespace sweeper-system $(ARGS)

## make bench-cascade: sweeper vs kube-controller-manager's garbage collector (about 30 minutes),
## and the API server's own delete ceiling (cascade.limit). BENCH_ONLY=archive|expiry|limit|startup|watch|equal
## for one part (limit: a plain client's best delete rate vs sweeper's unthrottled background
## cascade; startup: both collectors' start-up time and RSS with 100,000 objects, whose
## ConfigMaps BENCH_KEEP_FILLER=1 keeps for the next run; watch: the servers' CPU per 1,000 watch events
## delivered to each collector under the same churn; equal: both collectors at the same requests per
## second at the API server, sweeper --kube-api-qps 40 against kube-controller-manager's 20, which
## it doubles for its garbage collector).
bench-cascade:
	./scripts/bench-cascade.sh

## make bench-tenant: index vs scan strategy for one tenant among 50, then the same tenant torn down
## in clusters of 10,000 and 100,000 objects, medians of 5 runs (tenant.teardown10k/100k), then a
## collector killed mid-teardown and restarted, timed to the Tenant released (tenant.restart).
## BENCH_ONLY=base|teardown10k|teardown100k|teardown (both sizes)|restart; BENCH_KEEP_FILLER=1 keeps the filler.
bench-tenant:
	./scripts/bench-tenant.sh

## make bench-external: sweeper's phase 2 vs a CAPA-like baseline against LocalStack, with added
## latency, then a fleet of 100 clusters across 5 accounts and 3 regions deleted at once, with each
## account's request budget at its default (BENCH_ONLY=phase2|fleet; BENCH_FLEET_CLUSTERS scales the
## fleet down for a functional run: its full baseline takes about 11 minutes at 80 ms).
bench-external:
	release="$$(./scripts/build-release.sh)" && ./scripts/env-up.sh && source .state/env && \
	if [ -z "$$BENCH_ONLY" ] || [ "$$BENCH_ONLY" = phase2 ]; then "$$release/examples/bench_external"; fi && \
	if [ -z "$$BENCH_ONLY" ] || [ "$$BENCH_ONLY" = fleet ]; then "$$release/examples/bench_fleet"; fi

## make bench-scan: the leak scan (`sweeper scan`) against LocalStack with added latency
## (BENCH_LATENCY_MS, default 80): its calls against one tagging query per cluster name, and its
## time with 20 vs 200 live clusters (BENCH_RUNS scans of each, default 5). A few minutes.
bench-scan:
	release="$$(./scripts/build-release.sh)" && ./scripts/env-up.sh && source .state/env && \
	"$$release/examples/bench_scan"

## make bench-capa: a cluster CAPA v2.13.0's own controller built in LocalStack, with a workload's
## leaks, deleted two ways: CAPA alone with its ExternalResourceGC gate on (stopped at 120 s if it
## never finishes), and CAPA with its gate off plus sweeper; the time until the AWSCluster is gone
## and what each left (BENCH_RUNS, default 3). Release build; a few minutes once built.
bench-capa:
	./scripts/bench-capa.sh
