# The commands the README names. Build caches live under $HOME so fresh clones and CI reuse them.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/rkcm/target
CARGO ?= cargo

.PHONY: test-shards build release image test lint unit run bench chaos sim sim-mutants cluster-up cluster-down cluster-env cluster-status e2e-bins deploy-manifests skew gen-gates

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p rkcm

# The container image as an OCI image archive, without a container engine (e2e/image.sh).
image:
	bash e2e/image.sh

# Brings the local control plane up if none runs (and down again afterwards), then runs
# lint, unit tests and every test marked as needing the apiserver.
test:
	bash e2e/test.sh

# Every controller's real-plane suite with three sharded replicas of each controller.
test-shards:
	bash e2e/test-shards.sh

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Tests that need no cluster.
unit:
	$(CARGO) test --workspace

# Build, bring up the local control plane, run rkcm against it with all its controllers.
run:
	bash e2e/run.sh

bench:
	bash e2e/bench.sh

# The long fault suite (kills, watch gaps under churn) for upstream and rkcm, on its own plane.
chaos:
	bash e2e/chaos.sh

# The deterministic simulation over seeds 0..SIM_SEEDS for every controller (sim/).
# Replay one: cargo run -p rkcm-sim -- --controller C --seed S --trace
SIM_SEEDS ?= 500
sim:
	$(CARGO) run --release -p rkcm-sim -- --seeds $(SIM_SEEDS)

# Each deliberate bug of rkcm_runtime::mutants (one simulator build, chosen at run time) must be
# caught by the invariant named for it within its seed budget (SIM_MUTANT_SEEDS=N overrides);
# writes bench/reports/sim-mutants.md. `make test` runs it too (e2e/test.sh).
sim-mutants:
	bash sim/mutants.sh

e2e-bins:
	bash e2e/build.sh

# The real-plane suites against each supported Kubernetes version (v1.34 to v1.37), one after
# the other, each on its own plane; a summary table (e2e/skew.sh: SKEW_VERSIONS, SKEW_SUITES).
skew:
	bash e2e/skew.sh

# src/cli/gates/table/v1_*.rs from each supported version's source.
gen-gates:
	bash e2e/gen-gates.sh

cluster-up:
	bash e2e/cluster.sh up

cluster-down:
	bash e2e/cluster.sh down

cluster-env:
	@bash e2e/cluster.sh env

cluster-status:
	@bash e2e/cluster.sh status

# deploy/rkcm.yaml from charts/rkcm (a test fails when they differ).
deploy-manifests:
	bash e2e/render-deploy.sh
