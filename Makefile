.DEFAULT_GOAL := help
GO ?= go
PKGS := ./...
FUZZTIME ?= 30s

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
lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

.PHONY: openapi
openapi: ## Copy openapi/openapi.json (the source) to docs/openapi.json
	$(GO) generate ./openapi

.PHONY: bench
bench: ## Run the Go benchmarks (record figures with their command in docs/benchmarks.md)
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each
	@for pkg in . ./filter ./httpapi ./push ./seal; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep ^Fuzz); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
