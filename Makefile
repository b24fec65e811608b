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

.PHONY: run test test-deps bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(STAMP)
	$(BIN)/odradek broker

# Debian packages the tests drive; installed only when their command (or file) is missing.
test-deps:
	@missing=""; for entry in $(APT_PACKAGES); do \
		needed=$${entry%%:*}; \
		case $$needed in /*) test -e $$needed ;; *) command -v $$needed >/dev/null ;; esac \
			|| missing="$$missing $${entry#*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Three workers, one module each at a time: a module's shared cluster stays in one worker.
# pytest exits 5 when it collects nothing, which fails the target.
test: $(STAMP) test-deps
	$(BIN)/pytest -q -n 3 --dist loadfile

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
