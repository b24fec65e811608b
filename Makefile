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

.PHONY: run test test-deps bench bench-deps clean

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

# Three workers, one module each at a time: a module's shared cluster stays in one worker.
# pytest exits 5 when it collects nothing, which fails the target.
test: $(STAMP) test-deps
	$(BIN)/pytest -q -n 3 --dist loadfile

# The whole benchmark (docs/benchmarks.md); `make bench ARGS=--quick` for a short run.
bench: $(STAMP) bench-deps
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench.suite $(ARGS)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
