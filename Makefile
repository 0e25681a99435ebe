.DEFAULT_GOAL := help
GO ?= go
PKGS := ./...
FUZZTIME ?= 30s
# golangci-lint is pinned and built from the Go module proxy into bin/ once
# per version.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build ./bin/herald
	$(GO) build -o bin/herald ./cmd/herald

.PHONY: run
run: ## Run herald on the embedded store in ./herald-data (dev mode)
	$(GO) run ./cmd/herald serve --dev

.PHONY: test
test: ## Run every test (PostgreSQL tests skip, visibly, when no server answers)
	$(GO) test $(PKGS)

.PHONY: test-race
test-race: ## Run every test with the race detector, one package at a time (what CI runs)
	$(GO) test -race -p 1 $(PKGS)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## gofmt, go vet and golangci-lint (.golangci.yml: linters and the architecture rules)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GOLANGCI_LINT) run $(PKGS)

# The module cache is asked first, as a proxy, so the build needs no network
# when the modules are already there; then the configured GOPROXY.
$(GOLANGCI_LINT):
	GOBIN=$(dir $@) GOPROXY="file://$$($(GO) env GOMODCACHE)/cache/download,$$($(GO) env GOPROXY)" \
	  $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: openapi
openapi: ## Copy openapi/openapi.json (the source) to docs/openapi.json
	$(GO) generate ./openapi

.PHONY: bench
bench: ## Run the Go benchmarks (record figures with their command in docs/benchmarks.md)
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each
	@for pkg in . ./eventtype ./filter ./httpapi ./push ./seal ./source; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep ^Fuzz); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
