# mithril: build, test, run and install (GNU make).
#
#   make            release build (same as `make build`)
#   make test       unit + integration tests; the integration tests start real
#                   redis-server nodes, installed here if missing and root
#   make run        a local Redis Cluster with mithril in front on $(PORT)
#                   (make run PORT=7000 MASTERS=3 REPLICAS=1)
#   make bench      mithril vs a direct cluster connection, figures only
#                   (ROUNDS=9 make bench; make bench MODE=callgrind)
#   make lint       rustfmt check + clippy with warnings as errors
#   make install    binary and man pages under $(DESTDIR)$(PREFIX)
#   make clean

CARGO      ?= cargo
PORT       ?= 7777
MASTERS    ?= 3
REPLICAS   ?= 0
TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
MITHRIL    := $(TARGET_DIR)/release/mithril

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
INSTALL    ?= install

REDIS_PKGS := redis-server redis-tools

.DEFAULT_GOAL := build
.PHONY: build test run bench lint clean install uninstall check-redis

build:
	$(CARGO) build --release

test: check-redis
	$(CARGO) test --workspace

run: check-redis build
	$(CARGO) run --release --example devcluster -- --mithril $(MITHRIL) \
		--port $(PORT) --masters $(MASTERS) --replicas $(REPLICAS)

# The end-to-end comparison in benches/compare (see README "Benchmarks"): a
# local cluster, mithril in front, redis-benchmark direct vs through mithril.
# It prints figures and fails only on errors, never on a number. Settings come
# from the environment: ROUNDS (3), BENCH_SECONDS (6), WORKLOADS (GET,SET,
# MSET,MGET), MITHRIL_THREADS, MITHRIL_BIN; MODE=callgrind (or
# `make bench-callgrind`) counts mithril's instructions per GET instead,
# under valgrind (installed here if missing and root).
bench: check-redis build
	@if [ "$(MODE)" = callgrind ] && ! command -v valgrind >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "valgrind not found; installing it"; \
			export DEBIAN_FRONTEND=noninteractive; \
			apt-get install -y valgrind || \
				{ apt-get update && apt-get install -y valgrind; } || exit 1; \
		else \
			echo "MODE=callgrind needs valgrind: sudo apt-get install -y valgrind" >&2; \
			exit 1; \
		fi; \
	fi
	MODE=$(MODE) $(CARGO) bench --bench compare

.PHONY: bench-callgrind
bench-callgrind:
	$(MAKE) bench MODE=callgrind

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean

install: build
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8
	$(INSTALL) -m 0755 $(MITHRIL) $(DESTDIR)$(BINDIR)/mithril
	$(INSTALL) -m 0644 man/mithril.8 $(DESTDIR)$(MANDIR)/man8/mithril.8
	$(INSTALL) -m 0644 man/mithril.conf.5 $(DESTDIR)$(MANDIR)/man5/mithril.conf.5

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/mithril $(DESTDIR)$(MANDIR)/man8/mithril.8 \
		$(DESTDIR)$(MANDIR)/man5/mithril.conf.5

# The tests and `make run` need redis-server (or $REDIS_SERVER). As root we
# install it; otherwise we say how and stop.
check-redis:
	@if [ -n "$${REDIS_SERVER:-}" ] && [ -x "$${REDIS_SERVER}" ]; then exit 0; fi; \
	if command -v redis-server >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "redis-server not found; installing $(REDIS_PKGS)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y $(REDIS_PKGS) || \
			{ apt-get update && apt-get install -y $(REDIS_PKGS); } || exit 1; \
		command -v redis-server >/dev/null 2>&1 || \
			{ echo "redis-server still not found after installing $(REDIS_PKGS)" >&2; exit 1; }; \
	else \
		echo "redis-server not found; the tests and 'make run' need it. Install it with:" >&2; \
		echo "sudo apt-get install -y $(REDIS_PKGS)" >&2; \
		exit 1; \
	fi
