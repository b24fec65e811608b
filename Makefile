# The front door: `make run` starts a broker, `make test` runs the whole suite.
# Both create .venv and install what they need on a fresh machine.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# command:Debian package, for what the tests run: kcat, and Java for Spark
APT_PACKAGES := kcat:kcat java:openjdk-17-jre-headless
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-deps bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(STAMP)
	$(BIN)/odradek broker

# Debian packages the tests drive; installed only when their command is missing.
test-deps:
	@missing=""; for entry in $(APT_PACKAGES); do \
		command -v $${entry%%:*} >/dev/null || missing="$$missing $${entry#*:}"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

test: $(STAMP) test-deps
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
