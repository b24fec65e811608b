# The front door: `make run` starts a broker, `make test` runs the whole suite.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# command:Debian package, for what the tests run: kcat, Java for Spark and ZooKeeper, and
# ZooKeeper's server, which is a jar rather than a command: an entry starting with / is
# checked as a file
APT_PACKAGES := kcat:kcat java:openjdk-17-jre-headless /usr/share/java/zookeeper.jar:libzookeeper-java
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-deps bench bench-deps bench-tools clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(STAMP)
	$(BIN)/odradek broker

# Debian packages installed only when their command (or file) is missing.
define apt_install
	@missing=""; for entry in $(1); do \
		needed=$${entry%%:*}; \
		case $$needed in /*) test -e $$needed ;; *) command -v $$needed >/dev/null ;; esac \
			|| missing="$$missing $${entry#*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef

# What the tests drive.
test-deps:
	$(call apt_install,$(APT_PACKAGES))

# What the benchmark measures beside odradek: Redis Streams (the ZooKeeper of the replicated
# rows is in APT_PACKAGES).
bench-deps:
	$(call apt_install,$(APT_PACKAGES) redis-server:redis-server)

# librdkafka's C load tool for the C-client and small-request rows, built once from the
# librdkafka source that node-rdkafka carries on the npm registry (2.12.0 in 3.6.1; Debian's
# 2.0.2 cannot talk to Tansu). Without npm or a compiler the bench skips those rows.
RDKAFKA_PERFORMANCE := bench/.tools/rdkafka_performance
NODE_RDKAFKA := node-rdkafka@3.6.1
LIBRDKAFKA_CONFIGURE := --disable-ssl --disable-gssapi --disable-sasl --disable-zstd \
	--disable-curl --disable-lz4-ext --disable-zlib

bench-tools: $(RDKAFKA_PERFORMANCE)

$(RDKAFKA_PERFORMANCE):
	@build=$$(mktemp -d) && trap 'rm -rf "$$build"' EXIT && \
	echo "building rdkafka_performance from $(NODE_RDKAFKA)'s librdkafka (about a minute)" && \
	( cd "$$build" && npm pack --silent $(NODE_RDKAFKA) >/dev/null && tar xzf *.tgz && \
	  cd package/deps/librdkafka && ./configure $(LIBRDKAFKA_CONFIGURE) >/dev/null && \
	  $(MAKE) -s -C src librdkafka.a >/dev/null 2>&1 && \
	  $(MAKE) -s -C examples rdkafka_performance >/dev/null 2>&1 ) && \
	mkdir -p $(@D) && cp "$$build/package/deps/librdkafka/examples/rdkafka_performance" $@ \
	|| echo "rdkafka_performance not built: the C-client rows will be skipped"

# Three workers, one module each at a time: a module's shared cluster stays in one worker.
# pytest exits 5 when it collects nothing, which fails the target.
test: $(STAMP) test-deps
	$(BIN)/pytest -q -n 3 --dist loadfile

# The whole benchmark (docs/benchmarks.md); `make bench ARGS=--quick` for a short run.
bench: $(STAMP) bench-deps bench-tools
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench.suite $(ARGS)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
