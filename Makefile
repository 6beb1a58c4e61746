# Talkbox build. `make run` sets up and opens the app; `make test` runs the tests.
# Every dependency is installed here, so a fresh machine needs nothing by hand.

SHELL := /bin/bash
ROOT  := $(abspath .)
CACHE := $(ROOT)/.cache
TOKENIZERS_VERSION := v1.22.1
TOKENIZERS_LIB := $(CACHE)/tokenizers-$(TOKENIZERS_VERSION)/libtokenizers.a
export PATH := $(PATH):$(HOME)/.cargo/bin:/usr/local/go/bin
export CGO_ENABLED := 1
export CGO_LDFLAGS := -L$(dir $(TOKENIZERS_LIB))
export LANG := en_US.UTF-8

# Debian packages for the build (Fyne/GLFW, cgo), the tests and headless runs.
# libopus/libogg encode Ogg Opus and libopusfile reads it back (engine/audioenc);
# libsoxr resamples reference audio for voice cloning (engine/audioin);
# libsonic changes speaking speed (engine/tempo, the server's "speed").
APT_PACKAGES := gcc g++ pkg-config libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev \
	libxinerama-dev libxi-dev libxxf86vm-dev libopenblas-dev libsoxr-dev xvfb x11-apps xdotool netpbm \
	libopus-dev libogg-dev libopusfile-dev libsonic-dev

GO_TEST_FLAGS ?=

.PHONY: cli cli-portable all deps apt-deps go-deps tokenizers build run test test-go fuzz race soak bench vet fmt native native-codec clean

all: build

deps: apt-deps tokenizers go-deps

apt-deps:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

go-deps:
	go mod download

# libtokenizers.a is built once from the daulet/tokenizers module's own Rust
# sources (later versions need a crate that only GitHub has). It needs cargo:
# the one on PATH or in ~/.cargo/bin (rustup), else Debian's cargo-web (Rust
# 1.85 or later; Debian's plain cargo is too old for the crates' lock file).
tokenizers: $(TOKENIZERS_LIB)

$(TOKENIZERS_LIB):
	@command -v cargo >/dev/null || { \
		echo "installing cargo (Debian package cargo-web) to build libtokenizers.a"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends cargo-web; }
	go mod download github.com/daulet/tokenizers@$(TOKENIZERS_VERSION)
	rm -rf $(CACHE)/tokenizers-src && mkdir -p $(CACHE)
	cp -r "$$(go env GOMODCACHE)/github.com/daulet/tokenizers@$(TOKENIZERS_VERSION)" $(CACHE)/tokenizers-src
	chmod -R u+w $(CACHE)/tokenizers-src
	cd $(CACHE)/tokenizers-src && cargo build --release --quiet
	mkdir -p $(dir $@) && cp $(CACHE)/tokenizers-src/target/release/libtokenizers.a $@
	rm -rf $(CACHE)/tokenizers-src

build: deps
	mkdir -p bin
	go build -o bin/talkbox ./app

# A CLI-only binary without the window (no X11/GL libraries needed), and a
# pure-Go one for machines without OpenBLAS, libopus or libsonic, e.g. GPU
# benchmark hosts (noopus: every output format but Opus; nosonic: speed 1 only).
cli: deps
	mkdir -p bin
	go build -tags nogui -o bin/talkbox-cli ./app

cli-portable: deps
	mkdir -p bin
	go build -tags nogui,noblas,noopus,nosonic -o bin/talkbox-portable ./app

run: build
	./bin/talkbox

# The test command of the README and of CI (smoke: the real window under
# Xvfb, whose session must leave stderr empty).
test: deps test-go fuzz test-race-ui smoke

test-go:
	go vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:" $$unformatted; exit 1; fi
	go test $(GO_TEST_FLAGS) ./...

# Every parser's fuzz target (package:Target:executions). Budgets are counts,
# not durations: Go 1.26's coordinator can report "context deadline exceeded"
# when a -fuzztime duration ends while a worker is mid-call (golang/go#75804,
# fixed in 1.27), which failed CI with no crasher. Counts are sized so the
# whole set stays under two minutes on the 2-core dev VM (the slow targets
# write files per input); the seed corpora (testdata/ or f.Add) also run as
# plain tests under `go test`. FUZZ_SCALE multiplies every count.
FUZZ_SCALE ?= 1
FUZZ_TARGETS := \
	engine/safetensors:FuzzParse:60000 \
	engine/model:FuzzParseConfig:40000 \
	engine/model:FuzzParseGenerationConfig:60000 \
	engine/model:FuzzParseCodecConfig:60000 \
	engine/text:FuzzTokenizerFiles:40000 \
	engine/codesfile:FuzzRead:40000 \
	engine/wav:FuzzDecode:60000 \
	engine/audioin:FuzzDecode:40000 \
	engine/voice:FuzzReadFile:5000 \
	app/settings:FuzzLoad:5000 \
	app/server:FuzzParseSpeech:20000
fuzz: deps
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$$(( $${rest##*:} * $(FUZZ_SCALE) )); \
		echo "fuzz $$pkg $$name ($${n} executions)"; \
		go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $${n}x ./$$pkg; \
	done

race: deps
	go test -race ./...

# 1,000 utterances through one engine (random texts, voices, cancels, Stops
# racing the next Speak); prints RSS, goroutines and GPU memory as JSON and
# fails on any error but a cancellation. Not in `make test` (minutes).
# BACKEND=cuda SOAK_MODEL=$(SYNTH_DIR) runs it on the GPU (after make native);
# tools/gpu/soak.sh is the same in one call on a lent GPU machine.
SOAK_MODEL ?= $(GOLDEN_TOKENIZER)
SOAK_N ?= 1000
soak: deps
	go run ./tools/soak --model $(SOAK_MODEL) --backend $(BACKEND) --n $(SOAK_N)

# Speed on a synthetic checkpoint of the real 0.6B shapes (random weights),
# made once; the tokenizer files come from the golden data when it is there.
SYNTH_DIR ?= $(CACHE)/synth-0.6b
BACKEND ?= cpu
GOLDEN_TOKENIZER := $(ROOT)/../shared/testdata/golden/checkpoints/qwen3-tts-tiny-customvoice
bench: build
	@[ -f $(SYNTH_DIR)/model.safetensors ] || ./bin/talkbox synth --size 0.6b --out $(SYNTH_DIR) \
		$$( [ -f $(GOLDEN_TOKENIZER)/vocab.json ] && echo --tokenizer-from $(GOLDEN_TOKENIZER) )
	./bin/talkbox bench --model $(SYNTH_DIR) --backend $(BACKEND) \
		$$( [ -f $(SYNTH_DIR)/vocab.json ] && echo --e2e-frames 12 )

vet:
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

# The CUDA libraries (engine/cuda and engine/cudacodec load them at run time; optional).
native: native-codec
	bash native/build.sh

# The GPU speech-tokenizer decoder alone (native/codec -> native/build/libtalkbox_codec.so).
native-codec:
	bash native/codec/build.sh

clean:
	rm -rf bin

# The window and the audio path under the race detector: the engine->UI
# bridge and the ring buffer are where races would hide.
.PHONY: test-race-ui smoke package
test-race-ui: deps
	go test -race ./ui/... ./app/audio/...

# The real window under Xvfb with the fake engine: type, Speak, Stop, Speak,
# screenshot; fails when the session writes anything on stderr (a Fyne
# call-thread violation included). TALKBOX_MODEL=DIR runs the
# real engine on that checkpoint instead. SHOT=docs/screenshot.png
# refreshes the README screenshot. The binary is bin/talkbox plus the fake
# engine (-tags fakeengine), which the shipped one leaves out.
SHOT ?= bin/smoke.png
smoke: deps
	mkdir -p bin
	go build -tags fakeengine -o bin/talkbox-smoke ./app
	TALKBOX_BIN=bin/talkbox-smoke ui/smoke.sh $(SHOT)

# Desktop bundle (.tar.xz with binary, .desktop entry and icon) with the
# deprecated fyne CLI (the new fyne.io/tools CLI is not reachable here). The
# binary is built here with the tags `fyne package` would use, so the CLI runs
# from the root and reads FyneApp.toml there.
FYNE := $(shell go env GOPATH)/bin/fyne
package: deps
	@test -x $(FYNE) || go install fyne.io/fyne/v2/cmd/fyne@v2.7.1
	mkdir -p bin/package
	go build -tags release,migrated_fynedo -ldflags "-s -w" -o bin/package/talkbox ./app
	$(FYNE) package --os linux --release --executable bin/package/talkbox --name Talkbox
	mv Talkbox.tar.xz bin/
	@echo "bundle: bin/Talkbox.tar.xz"
