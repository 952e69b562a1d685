# nodewright — developer entry points. `make demo` and `make test` are the two
# commands a fresh machine needs; both install what they use into caches
# outside the repository (see internal/localcloud) and reuse them.

GO        ?= go
# The functions are the main packages under functions/ (not every name there:
# functions/ also holds tests of the layout). Recursive (=), so only the
# targets that use it pay for the go list.
FUNCTIONS = $(notdir $(shell $(GO) list -find -f '{{if eq .Name "main"}}{{.Dir}}{{end}}' ./functions/...))
DIST      := dist
TEST_TIMEOUT ?= 80m

# jsii prints a banner on every CDK process under Node 20; tests read stderr.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := 1

.PHONY: print-functions all prepare test test-announce test-short build lint vet fmt-check fuzz demo synth clean help iam-mutation karpenter-compare karpenter-compare-test karpenter-coexist-test aws-contract karpenter-aws-diff sim-mutation trouble

all: build

help:
	@echo "make demo        run the provisioning demo on the local cloud"
	@echo "make test        vet + every test the machine can run (unit, integration, synth)"
	@echo "make test-short  unit tests only (go test -short)"
	@echo "make build       every Lambda function as linux/arm64 bootstrap under $(DIST)/<function>/"
	@echo "make lint        gofmt check, go vet and golangci-lint (.golangci.yaml); part of make test"
	@echo "make synth       make build, then cdk synth with that code into cdk.out (no AWS credentials, no network)"
	@echo "make iam-mutation drop each IAM statement in turn; the e2e tests must fail without it (slow)"
	@echo "make fuzz        run every Go fuzz target (every parser of untrusted input) for FUZZTIME each (default 60s)"
	@echo "make karpenter-compare  Karpenter's scheduler vs nodewright's on the plan-quality scenarios (slow; flags in KARPENTER_COMPARE_FLAGS)"
	@echo "make karpenter-compare-test  vet and test the karpentercompare module"
	@echo "make karpenter-coexist-test  the real Karpenter (KWOK provider) beside nodewright on the local cloud (slow; first run builds Karpenter)"
	@echo "make aws-contract  the real-account contract suite: doctor, dry-run launches, one real launch (needs NODEWRIGHT_CONTRACT_CLUSTER and AWS credentials)"
	@echo "make sim-mutation turn each simulator rule off in turn (FIDELITY.md); its named test must fail"
	@echo "make trouble     the day of realistic trouble: 1,000 steps on seeds 1 and 2 (internal/safety, TestDayOfTrouble; ~20 min)"
	@echo "make karpenter-aws-diff  nodewright's CreateLaunchTemplate/CreateFleet requests against Karpenter-AWS's own builders (part of make test)"

# Builds the local control plane (cold: ~8 min on 2 cores) and installs
# dynalite once, before the test packages that share them start.
prepare:
	$(GO) run ./cmd/nodewright local prepare

# Every local cloud evaluates the functions' AWS calls under the stack's
# synthesized IAM policies; each package reports the statements its calls
# used, and iamcoverage fails the run if an Allow statement of a function
# role allowed nothing (remove it, or add the test that needs it).
IAM_COVERAGE_DIR ?= $(or $(TMPDIR),/tmp)/nodewright-iam-coverage

# lint and prepare run first; say up front what the whole run costs.
test: test-announce lint prepare
	rm -rf $(IAM_COVERAGE_DIR)
	NODEWRIGHT_IAM_COVERAGE_DIR=$(IAM_COVERAGE_DIR) $(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(GO) run ./internal/localcloud/cmd/iamcoverage $(IAM_COVERAGE_DIR)
	cd $(KARPENTER_AWS_DIFF_DIR) && $(GO) test ./...

test-announce:
	@echo "make test: lint, then every package's tests, integration tests on real servers: tens of minutes on 2 cores;"
	@echo "           the first run also builds the Kubernetes control plane (~8 min, progress every 15 s). Unit tests only: make test-short"

# The IAM mutation test: for each Allow statement of the controller and
# registrar roles, run the end-to-end tests with that statement removed from
# the stack (NODEWRIGHT_IAM_DROP); every run must fail. ~5 min a statement
# on 2 cores: not part of `make test`.
IAM_MUTATION_PKGS ?= ./internal/provisioning ./internal/lifecycle ./internal/localcloud
IAM_MUTATION_RUN ?= .
iam-mutation: prepare
	@survived=0; for s in $$($(GO) run ./internal/localcloud/cmd/iamcoverage -statements ControllerRole RegistrarRole); do \
		if NODEWRIGHT_IAM_DROP=$$s $(GO) test -count=1 -run '$(IAM_MUTATION_RUN)' $(IAM_MUTATION_PKGS) >/dev/null 2>&1; then \
			echo "SURVIVED $$s: no test needs it"; survived=$$((survived+1)); \
		else echo "killed   $$s"; fi; \
	done; echo "$$survived statements survived"; test $$survived -eq 0

# The simulator's mutation test: each rule of
# internal/localcloud/awssim/FIDELITY.md is turned off in turn
# (NODEWRIGHT_SIM_RULES_OFF) and the test that rule names must then fail; a
# rule whose test does not report its own failure (a build error, a
# missing test) counts as surviving. Its test must pass
# with every rule on (make test runs it).
sim-mutation: prepare
	@survived=0; $(GO) run ./internal/localcloud/awssim/fidelity/cmd/simrules > $(or $(TMPDIR),/tmp)/nodewright-sim-rules.txt; \
	while read -r rule pkg test; do \
		if NODEWRIGHT_SIM_RULES_OFF=$$rule $(GO) test -count=1 -run "^$$test\$$" $$pkg 2>&1 | grep -q -- "--- FAIL: $$test"; then \
			echo "killed   $$rule ($$test)"; \
		else echo "SURVIVED $$rule: $$pkg $$test does not fail without it"; survived=$$((survived+1)); fi; \
	done < $(or $(TMPDIR),/tmp)/nodewright-sim-rules.txt; echo "$$survived rules survived"; test $$survived -eq 0

# The day of realistic trouble (internal/safety, TestDayOfTrouble): make test
# runs 150 steps of seed 1; this runs TROUBLE_STEPS on each of TROUBLE_SEEDS
# and prints each run's counts (the TROUBLE lines) and rules.
TROUBLE_STEPS ?= 1000
TROUBLE_SEEDS ?= 1 2
trouble: prepare
	@for seed in $(TROUBLE_SEEDS); do \
		out=$(or $(TMPDIR),/tmp)/nodewright-trouble-$$seed.txt; \
		NODEWRIGHT_TROUBLE_STEPS=$(TROUBLE_STEPS) NODEWRIGHT_TROUBLE_SEED=$$seed $(GO) test -count=1 -timeout 60m -run '^TestDayOfTrouble$$' -v ./internal/safety > $$out 2>&1; \
		rc=$$?; grep -E 'TROUBLE|rule "|live |^--- |^(ok|FAIL)' $$out; \
		if [ $$rc -ne 0 ]; then tail -80 $$out; exit 1; fi; \
	done

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# golangci-lint, pinned by tools/lint/go.mod (its own module, so its
# dependencies never touch the product's go.mod), built once into a cache
# outside the repository keyed by that module's go.sum. Configuration:
# .golangci.yaml (function length, complexity, error wrapping, unused
# parameters, one slog key style).
TOOLS_CACHE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/nodewright/tools
LINT_KEY      := $(shell cat tools/lint/go.mod tools/lint/go.sum | sha256sum | cut -c1-12)
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint-$(LINT_KEY)

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS_CACHE)
	cd tools/lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

lint: fmt-check vet $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

build: $(FUNCTIONS:%=$(DIST)/%/bootstrap)
	@test -n "$(strip $(FUNCTIONS))" || { echo "make build: no main package under functions/" >&2; exit 1; }

# The function list, one per line, for tests and scripts.
print-functions:
	@printf '%s\n' $(FUNCTIONS)

$(DIST)/%/bootstrap: FORCE
	@mkdir -p $(@D)
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags '-s -w' -o $@ ./functions/$*

FUZZTIME ?= 60s
# Every func FuzzX in the repository, found by grep so a new target is never
# left out; go test fuzzes one target per run. The minimize cap keeps the
# fuzzer from stalling while it shrinks multi-KiB inputs. A crash is saved
# under the package's testdata/fuzz and fails the run.
fuzz:
	@set -e; git grep -l '^func Fuzz' -- '*_test.go' | while read -r file; do \
		dir=./$$(dirname $$file); \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "== $$dir $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$dir; \
		done; \
	done

# Scale the example inflate Deployment (infra/examples/workloads) to 10 and back to 0 on the local cloud,
# through the real function handlers; ends with a DEMO OK line.
demo:
	$(GO) run ./cmd/nodewright demo

# cdk synth with the pinned CLI, no credentials, no network; CLUSTER_NAME and
# CONFIG_DIR pick what to synthesize (see infra/README.md).
synth: build
	PLACEHOLDER_ASSETS=false infra/synth.sh

clean:
	rm -rf $(DIST) cdk.out

# Karpenter's own provisioning scheduler (sigs.k8s.io/karpenter, pinned in
# its own module, which the root go.mod ignores) side by side with nodewright's
# solver on internal/scheduling/testdata/quality and Karpenter's benchmark
# "diverse" workload, on the ../shared/aws-data catalog. Minutes: not part of
# `make test`. Flags go to `karpentercompare bench`, for example
# KARPENTER_COMPARE_FLAGS='--runs 1 --diverse 5000 -o json'.
KARPENTER_COMPARE_DIR   := internal/scheduling/karpentercompare
KARPENTER_COMPARE_FLAGS ?=
karpenter-compare:
	cd $(KARPENTER_COMPARE_DIR) && $(GO) run . bench $(KARPENTER_COMPARE_FLAGS)

karpenter-compare-test:
	cd $(KARPENTER_COMPARE_DIR) && $(GO) vet ./... && $(GO) test ./...

# nodewright's launch requests against Karpenter-AWS's own launch template
# and instance providers (pinned in their own module, which the root go.mod
# ignores) on every example EC2NodeClass: every difference is fixed or
# listed, with its reason, in DIFFERENCES.md (internal/aws/karpenterawsdiff).
# About 35 s warm (vet and test; the test alone 20 s): part of `make test`.
KARPENTER_AWS_DIFF_DIR := internal/aws/karpenterawsdiff
karpenter-aws-diff:
	cd $(KARPENTER_AWS_DIFF_DIR) && $(GO) vet ./... && $(GO) test -count=1 ./...

# The real Karpenter controller (its KWOK provider, built once from its own
# module into ~/.cache/nodewright/karpenter) beside nodewright's functions on
# the local cloud, through churn: neither touches the other's nodes,
# NodeClaims or instances (internal/localcloud/karpenter). Minutes: not part
# of `make test`.
KARPENTER_COEXIST_DIR := internal/localcloud/karpenter
karpenter-coexist-test:
	cd $(KARPENTER_COEXIST_DIR) && $(GO) vet ./... && $(GO) test -v -count=1 -timeout 100m ./...

# The real-account contract suite (internal/doctor/contract) for whoever has
# a sandbox account with an EKS cluster and the stack deployed: doctor,
# dry-run launches of a spot and an on-demand claim under the deployed
# controller role's policy (iam:SimulatePrincipalPolicy), and one real
# launch of the smallest on-demand type a NodePool allows, terminated with
# cleanup on any exit (Ctrl-C included). Skipped without
# NODEWRIGHT_CONTRACT_CLUSTER and AWS credentials; NODEWRIGHT_CONTRACT_CONFIG
# is the configDir (default karpenter/). Its local-cloud half runs in make test.
aws-contract:
	$(GO) test -count=1 -v -timeout 30m -run '^TestAWSContract$$' ./internal/doctor/contract

FORCE:
