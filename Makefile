# tt-model: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
PKGS    := ./...

.PHONY: build test demo bench lint fuzz clean

build:
	$(GO) build -trimpath -o $(BIN)/ ./cmd/...

test:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 $(PKGS)

demo: build
	./scripts/demo.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fuzz:
	$(GO) test ./manifest -run '^$$' -fuzz FuzzDecode -fuzztime 60s

clean:
	rm -rf $(BIN) build
