# tt-model: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
# build/ holds staged packages (their code/ is Go source of this module's
# layout): never part of the module's own packages.
PKGS    = $(shell $(GO) list -e ./... | grep -v '/build/')

.PHONY: build test demo demo-pi05 k8s-demo bench lint fuzz clean

# tt-model is linked statically (no cgo): the images of the Python kinds run
# it as their supervisor on any base. tt-model-server needs cgo (the kernels).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/tt-model
	$(GO) build -trimpath -o $(BIN)/ ./cmd/tt-model-server

# Every skip lands in $(SKIP_LOG) (internal/testing/testenv); the run ends with the
# list, and TT_REQUIRE=… (set by .ci/run) turns a missing requirement into a
# failure instead of a skip.
SKIP_LOG := $(CURDIR)/$(BIN)/test-skips.log
RECORD_LOG := $(CURDIR)/$(BIN)/test-records.log
# go test's default 10-minute limit per package binary is too close for the
# packages that build images and boot hosts on a 2-core CI machine.
TEST_TIMEOUT ?= 30m
test: kernels
	$(GO) vet $(PKGS)
	@mkdir -p $(BIN); : > $(SKIP_LOG); : > $(RECORD_LOG)
	@TT_SKIP_LOG=$(SKIP_LOG) TT_RECORD_LOG=$(RECORD_LOG) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(PKGS); rc=$$?; \
	  echo "== recorded by the tests on real components:"; sort $(RECORD_LOG); \
	  n=$$(grep -c . $(SKIP_LOG)); echo "== skipped tests: $$n (TT_REQUIRE=$${TT_REQUIRE:-unset})"; \
	  sort $(SKIP_LOG); exit $$rc

# make kernels: the C kernels on their own, without Go: a static library of every kernel, the
# self-test binary (the case table native's Go tests run; make kernels runs it) and a GEMM
# micro-bench (bin/kernels/tt_bench [M K N]...), compiled as they ship (-O3, runtime dispatch,
# no -march=native) and -Wall -Wextra -Werror clean, one object per source file.
KCC     ?= gcc
KCFLAGS ?= -O3 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror
KBUILD  := $(BIN)/kernels
KSRC    := $(wildcard kernels/common/*.c kernels/pi05/*.c kernels/rfdetr/*.c)
KOBJ    := $(patsubst kernels/%.c,$(KBUILD)/obj/%.o,$(KSRC))
KINC    := -Ikernels/common -Ikernels/pi05 -Ikernels/rfdetr
.PHONY: kernels
kernels: $(KBUILD)/tt_selftest $(KBUILD)/tt_bench
	$(KBUILD)/tt_selftest

$(KBUILD)/obj/%.o: kernels/%.c $(wildcard kernels/*/*.h)
	@mkdir -p $(dir $@)
	$(KCC) $(KCFLAGS) $(KINC) -c $< -o $@

$(KBUILD)/libttkernels.a: $(KOBJ)
	ar rcs $@ $^

$(KBUILD)/%: kernels/tools/%_main.c $(KBUILD)/libttkernels.a
	$(KCC) $(KCFLAGS) $(KINC) $^ -o $@ -lm -lpthread

# make demo: RF-DETR; make demo PI05=1 (or make demo-pi05): pi0.5.
demo: build
ifeq ($(PI05),1)
	./scripts/demo-pi05.sh
else
	./scripts/demo.sh
endif

demo-pi05: build
	./scripts/demo-pi05.sh

# make k8s-demo: RF-DETR as a pod on a single-node Kubernetes this machine runs for the demo (root;
# docs/kubernetes.md, "Trying it on a local cluster"); everything is stopped and undone at the end.
k8s-demo: build
	./scripts/k8s-demo.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# push and pull of the RF-DETR package against the local Hub on loopback, beside cp -r of the
# same tree, and a second push with nothing changed (docs/PERFORMANCE.md, "Hub").
.PHONY: bench-hub
bench-hub: build
	test -d build/rf-detr || ./bin/tt-model package --container models/rf-detr/tt-model.yaml --out build
	$(GO) run ./tools/hubbench -package build/rf-detr -runs 5

# A local Hugging Face Hub on 127.0.0.1:8787 for the README's author and operator loops (in
# memory; Ctrl-C stops it), serving a random RF-DETR-base checkpoint at the pinned revision
# (the real weights cannot be downloaded here; its detections are meaningless). The checkpoint
# lives in LOCAL_HUB_WEIGHTS, never in a Hugging Face cache, and carries the test-weights marker
# (hub.TestWeightsFile): a cache that pulls it from this Hub holds it marked, and every command
# and the server name it as random test weights.
LOCAL_HUB_WEIGHTS ?= build/localhub-weights
LOCAL_HUB_ADDR    ?= 127.0.0.1:8787
LOCAL_HUB_STORAGE ?= 127.0.0.1:8788
RFDETR_PIN        := 7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a
.PHONY: local-hub
local-hub:
	test -f $(LOCAL_HUB_WEIGHTS)/.tt-model-test-weights || $(GO) run ./tools/demo --checkpoint $(LOCAL_HUB_WEIGHTS)
	@echo "random test weights for Roboflow/rf-detr-base: $(LOCAL_HUB_WEIGHTS) (no Hugging Face cache written)"
	$(GO) run ./tools/localhub -addr $(LOCAL_HUB_ADDR) -storage-addr $(LOCAL_HUB_STORAGE) \
		-weights Roboflow/rf-detr-base@$(RFDETR_PIN)=$(LOCAL_HUB_WEIGHTS)

# Each target 60 s: the manifest decoder, the /predict request body (JSON, multipart) and image paths.
fuzz:
	$(GO) test ./manifest -run '^$$' -fuzz FuzzDecode -fuzztime 60s
	$(GO) test ./server/rfdetr -run '^$$' -fuzz FuzzPredictBody -fuzztime 60s -fuzzminimizetime 2s
	$(GO) test ./server/rfdetr -run '^$$' -fuzz FuzzPredictMultipart -fuzztime 60s -fuzzminimizetime 2s
	$(GO) test ./server/rfdetr -run '^$$' -fuzz FuzzPredictImage -fuzztime 60s -fuzzminimizetime 2s
	$(GO) test ./server/pi05 -run '^$$' -fuzz FuzzPI05MsgpackAction -fuzztime 60s -fuzzminimizetime 2s
	$(GO) test ./server/pi05 -run '^$$' -fuzz FuzzMsgpackNumpy -fuzztime 60s -fuzzminimizetime 2s

clean:
	rm -rf $(BIN) build

# pi0.5 CPU megakernels vs the strongest PyTorch 1.13 peer (tools/reference/pi05_peer.py) in one run
# per request shape, one table each (docs/PERFORMANCE.md, "pi0.5"). Not in CI: the full-size random
# bf16 checkpoint is ~6.7 GB and a run needs ~16 GB of RAM (ours, then the peer's).
# A shallower full-width model: make bench-pi05 PI05_BENCH_DIR=build/pi05-v3l2 PI05_CKPT_ARGS="--vision-layers 3 --layers 2"
PI05_BENCH_DIR   ?= build/pi05-bench
PI05_CKPT_ARGS   ?=
PI05_BENCH_CASES ?= 3:20 2:128
PI05_BENCH_ARGS  ?= -threads 2 -horizon 50 -steps 10 -reps 3 -batches 1,2,4,8
.PHONY: bench-pi05 pi05-bench-checkpoint
pi05-bench-checkpoint:
	test -f $(PI05_BENCH_DIR)/model.safetensors || \
		/usr/bin/python3 tools/reference/pi05.py checkpoint --full --dtype bf16 --out $(PI05_BENCH_DIR) $(PI05_CKPT_ARGS)
bench-pi05: pi05-bench-checkpoint
	@for c in $(PI05_BENCH_CASES); do \
		$(GO) run ./tools/pi05bench -weights $(PI05_BENCH_DIR) -cams $${c%%:*} -tokens $${c##*:} $(PI05_BENCH_ARGS) || exit 1; \
	done

# The serving engine (docs/PERFORMANCE.md "pi0.5 serving engine"): closed-loop robots against
# tt-model-server in the layouts, with and without the SLO, on a full-width model of reduced depth.
ENGINE_BENCH_DIR  ?= build/pi05-v3l2
ENGINE_BENCH_ARGS ?= --duration 60s --robots 4
.PHONY: bench-engine
bench-engine: build
	test -f $(ENGINE_BENCH_DIR)/model.safetensors || \
		/usr/bin/python3 tools/reference/pi05.py checkpoint --full --dtype bf16 --vision-layers 3 --layers 2 --out $(ENGINE_BENCH_DIR)
	$(GO) run ./tools/enginebench --server $(BIN)/tt-model-server --weights $(ENGINE_BENCH_DIR) --json $(BIN)/enginebench.json $(ENGINE_BENCH_ARGS)

# RF-DETR C program vs the measured FMA / vdpbf16ps peak and the PyTorch peer (docs/PERFORMANCE.md).
.PHONY: bench-rfdetr
bench-rfdetr:
	$(GO) run ./tools/rfdetrbench -threads 1,2 -repeat 5 -rounds 3

# Start to ready of the real server, from safetensors and from the packed-weights cache, and an
# exit-75 restart under tt-model supervise, for pi0.5 (the bench checkpoint) and RF-DETR (a random
# full-size checkpoint) (docs/PERFORMANCE.md, "Cold start"). Writes ~7 GB of packed weights under build/.
RFDETR_BENCH_DIR ?= build/rfdetr-bench
.PHONY: bench-coldstart
bench-coldstart: build pi05-bench-checkpoint
	$(GO) run ./tools/coldstart -model pi05 -weights $(PI05_BENCH_DIR)
	$(GO) run ./tools/coldstart -model rf-detr -weights $(RFDETR_BENCH_DIR)
