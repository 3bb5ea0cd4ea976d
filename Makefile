# mithril: build, test, run and install (GNU make).
#
#   make            release build (same as `make build`)
#   make test       unit + integration tests; the integration tests start real
#                   redis-server nodes, installed here if missing and root
#   make run        a local Redis Cluster with mithril in front on $(PORT)
#                   (make run PORT=7000 MASTERS=3 REPLICAS=1)
#   make bench      mithril vs a direct cluster connection, figures only,
#                   plain then TLS on both sides
#                   (ROUNDS=9 make bench; TLS=0 make bench; make bench MODE=callgrind)
#   make bench-memory  RSS with idle clients and under non-reading floods
#   make lint       rustfmt check + clippy with warnings as errors, and
#                   tools/check-seams (the placement and backend seams, files <= 800 lines)
#   make install    binary, man pages and (unless one exists) the config file:
#                     $(DESTDIR)$(BINDIR)/mithril
#                     $(DESTDIR)$(MANDIR)/man8/mithril.8, man5/mithril.conf.5
#                     $(DESTDIR)$(SYSCONFDIR)/mithril/mithril.conf
#                   PREFIX=/usr/local, BINDIR, MANDIR, SYSCONFDIR=$(PREFIX)/etc and
#                   DESTDIR as packagers expect; MITHRIL=path installs that binary
#                   instead of building the release one
#   make uninstall  the same files; the config only if it is unmodified
#   make deb        target/deb/mithril_VERSION_ARCH.deb, built with dpkg-deb from a
#                   staged install (PREFIX=/usr SYSCONFDIR=/etc) plus the systemd
#                   unit and the scripts in packaging/debian/
#   make clean

CARGO      ?= cargo
PORT       ?= 7777
MASTERS    ?= 3
REPLICAS   ?= 0
TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),target)
MITHRIL    ?= $(TARGET_DIR)/release/mithril

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(PREFIX)/etc
INSTALL    ?= install
CONFDIR     = $(SYSCONFDIR)/mithril

# Given MITHRIL=path on the command line, install that binary as it is.
INSTALL_DEPS := $(if $(filter command line,$(origin MITHRIL)),,build)

DEB_VERSION ?= $(shell sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
DEB_ARCH    ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR     := $(TARGET_DIR)/deb
DEB_STAGE   := $(DEB_DIR)/mithril_$(DEB_VERSION)_$(DEB_ARCH)
DEB_FILE    := $(DEB_DIR)/mithril_$(DEB_VERSION)_$(DEB_ARCH).deb

REDIS_PKGS := redis-server redis-tools nutcracker openssl
# Where Debian puts nutcracker (the twemproxy the pool tests compare with).
NUTCRACKER ?= $(firstword $(wildcard /usr/sbin/nutcracker /usr/bin/nutcracker /usr/local/sbin/nutcracker /usr/local/bin/nutcracker))

.DEFAULT_GOAL := build
.PHONY: build test run bench lint clean install uninstall deb check-redis

build:
	$(CARGO) build --release

# The suites that exercise ordering, fan-out, migration, failover, hostile
# input, the reply cache, client tracking and the SIGTERM drain run a second
# time on the shared pipes (backend-sharding yes with four workers, put
# before each test's own settings: see tests/support/mithril.rs).
SHARDED_SUITES := proxy_core command_surface correctness resilience hostile_input fanout_as_one_server \
	reply_cache reply_cache_workers client_tracking daemon_lifecycle pool_commands pool_groups

test: check-redis
	$(CARGO) test --workspace
	MITHRIL_TEST_CONF='backend-sharding yes\nthreads 4' $(CARGO) test \
		$(addprefix --test ,$(SHARDED_SUITES))

run: check-redis build
	$(CARGO) run --release --example devcluster -- --mithril $(MITHRIL) \
		--port $(PORT) --masters $(MASTERS) --replicas $(REPLICAS)

# The end-to-end comparison in benches/compare (see README "Benchmarks"): a
# local cluster, mithril in front, redis-benchmark direct vs through mithril.
# It prints figures and fails only on errors, never on a number. Settings come
# from the environment: ROUNDS (3), BENCH_SECONDS (6), WORKLOADS (GET,SET,
# MSET,MGET,GETWIDE,ZIPF), MITHRIL_THREADS, MITHRIL_BIN; MODE=callgrind (or
# `make bench-callgrind`) counts mithril's instructions per GET instead,
# under valgrind (installed here if missing and root); CALLGRIND_CACHE=1
# counts those of a reply-cache hit, CALLGRIND_SET=1 those of a SET. After
# the plain tables comes a TLS one (benches/compare/tls.rs; TLS=0 leaves it
# out): a 3-master cluster with TLS ports, GET and SET at -P 1 and -P 16,
# redis-benchmark --tls --cluster against mithril with tls-port and
# tls-cluster yes, each ratio beside the plain one of the same run
# (TLS_CLUSTER=0: mithril reaches the nodes over plain TCP). A
# second pass (SHARDING=1, alone as
# `make bench-sharding`) runs GET and SET with threads 1 and 2 and each
# backend-sharding mode; a third (`make bench-pools`) a pool of standalone
# servers against nutcracker.
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
	@if [ "$(MODE)" != callgrind ]; then SHARDING=1 $(CARGO) bench --bench compare; fi
	@if [ "$(MODE)" != callgrind ]; then $(CARGO) bench --bench pools; fi

# A pool of three standalone servers, mithril against nutcracker
# (benches/pools.rs): GET and SET at -P 1 and -P 16, MGET of 10 keys; then
# a Sentinel pool of two master-replica groups beside a two-master cluster,
# both behind mithril (benches/pools/groups.rs; GROUPS=0 leaves it out).
.PHONY: bench-pools
bench-pools: check-redis build
	$(CARGO) bench --bench pools

# The shared pipes alone: GET and SET against direct with threads 1 and 2
# and each backend-sharding mode (benches/compare, SHARDING=1).
.PHONY: bench-sharding
bench-sharding: check-redis build
	SHARDING=1 $(CARGO) bench --bench compare

.PHONY: bench-callgrind
bench-callgrind:
	$(MAKE) bench MODE=callgrind

# benches/memory.rs: mithril's RSS with 10,000 idle clients and under
# clients that pipeline big GETs without reading (figures only; about a
# minute). IDLE_CLIENTS, FLOOD_CLIENTS, FLOOD_SECONDS, MITHRIL_BIN.
.PHONY: bench-memory
bench-memory: check-redis
	$(CARGO) bench --bench memory

# What statistics cost: the release binary with `stats yes` against `stats
# no`, interleaved (benches/stats_cost.rs; ROUNDS, REQUESTS, MODE=callgrind).
.PHONY: bench-stats
bench-stats: check-redis build
	MODE=$(MODE) $(CARGO) bench --bench stats_cost

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	sh tools/check-seams

clean:
	$(CARGO) clean

# An existing config is never overwritten: it is the administrator's.
install: $(INSTALL_DEPS)
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(CONFDIR)
	$(INSTALL) -m 0755 $(MITHRIL) $(DESTDIR)$(BINDIR)/mithril
	$(INSTALL) -m 0644 man/mithril.8 $(DESTDIR)$(MANDIR)/man8/mithril.8
	$(INSTALL) -m 0644 man/mithril.conf.5 $(DESTDIR)$(MANDIR)/man5/mithril.conf.5
	@if [ -e $(DESTDIR)$(CONFDIR)/mithril.conf ]; then \
		echo "keeping the existing $(DESTDIR)$(CONFDIR)/mithril.conf"; \
	else \
		echo "$(INSTALL) -m 0644 conf/mithril.conf $(DESTDIR)$(CONFDIR)/mithril.conf"; \
		$(INSTALL) -m 0644 conf/mithril.conf $(DESTDIR)$(CONFDIR)/mithril.conf; \
	fi

# The config goes only when it is still the one installed (unmodified).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/mithril $(DESTDIR)$(MANDIR)/man8/mithril.8 \
		$(DESTDIR)$(MANDIR)/man5/mithril.conf.5
	@if [ -e $(DESTDIR)$(CONFDIR)/mithril.conf ]; then \
		if cmp -s conf/mithril.conf $(DESTDIR)$(CONFDIR)/mithril.conf; then \
			rm -f $(DESTDIR)$(CONFDIR)/mithril.conf; \
			rmdir $(DESTDIR)$(CONFDIR) 2>/dev/null || true; \
		else \
			echo "keeping the modified $(DESTDIR)$(CONFDIR)/mithril.conf"; \
		fi; \
	fi

# A binary package from a staged install. Depends: the newest glibc symbol
# version the binary uses, libgcc (unwinding), adduser (postinst).
deb: $(INSTALL_DEPS)
	rm -rf $(DEB_STAGE) $(DEB_FILE)
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_STAGE)) PREFIX=/usr \
		SYSCONFDIR=/etc MITHRIL=$(MITHRIL)
	strip --strip-unneeded $(DEB_STAGE)/usr/bin/mithril
	$(INSTALL) -D -m 0644 conf/mithril.service $(DEB_STAGE)/lib/systemd/system/mithril.service
	$(INSTALL) -D -m 0644 packaging/debian/copyright $(DEB_STAGE)/usr/share/doc/mithril/copyright
	gzip -9n $(DEB_STAGE)/usr/share/man/man8/mithril.8 $(DEB_STAGE)/usr/share/man/man5/mithril.conf.5
	$(INSTALL) -d $(DEB_STAGE)/DEBIAN
	$(INSTALL) -m 0644 packaging/debian/conffiles $(DEB_STAGE)/DEBIAN/conffiles
	$(INSTALL) -m 0755 packaging/debian/postinst packaging/debian/prerm \
		packaging/debian/postrm $(DEB_STAGE)/DEBIAN/
	glibc=$$(objdump -T $(MITHRIL) | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -Vu | tail -n 1); \
	size=$$(du -sk --exclude=DEBIAN $(DEB_STAGE) | cut -f1); \
	sed -e 's/@VERSION@/$(DEB_VERSION)/' -e 's/@ARCH@/$(DEB_ARCH)/' \
		-e "s/@GLIBC@/$${glibc:-2.17}/" -e "s/@SIZE@/$$size/" \
		packaging/debian/control.in > $(DEB_STAGE)/DEBIAN/control
	dpkg-deb --root-owner-group --build $(DEB_STAGE) $(DEB_FILE)
	@echo "built $(DEB_FILE)"

# The tests and `make run` need redis-server (or $REDIS_SERVER), the
# pool tests nutcracker (twemproxy, their placement oracle), and the TLS
# tests openssl (their certificates) and redis-cli --tls. As root we
# install what is missing; otherwise we say how and stop.
check-redis:
	@need=""; \
	if ! { [ -n "$${REDIS_SERVER:-}" ] && [ -x "$${REDIS_SERVER}" ]; } && \
		! command -v redis-server >/dev/null 2>&1; then need="redis-server redis-tools"; fi; \
	if [ -z "$(NUTCRACKER)" ] && ! command -v nutcracker >/dev/null 2>&1; then need="$$need nutcracker"; fi; \
	if ! command -v openssl >/dev/null 2>&1; then need="$$need openssl"; fi; \
	if [ -z "$$need" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "not found: $$need; installing $(REDIS_PKGS)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y $(REDIS_PKGS) || \
			{ apt-get update && apt-get install -y $(REDIS_PKGS); } || exit 1; \
		command -v redis-server >/dev/null 2>&1 || \
			{ echo "redis-server still not found after installing $(REDIS_PKGS)" >&2; exit 1; }; \
	else \
		echo "not found: $$need; the tests and 'make run' need them. Install them with:" >&2; \
		echo "sudo apt-get install -y $(REDIS_PKGS)" >&2; \
		exit 1; \
	fi
