# Two commands: `make demo` (no server needed) and `make test` (the whole suite);
# `make bench` runs the benchmarks (PostgreSQL and Redis on their usual local ports);
# `make bench-gc` purges 1,000,000 records on each while claims run (GC_ARGS to change it).
# `make docs` builds the documentation site into site/ (mkdocs build --strict).
# `make bench-audit` audits 1,000,000 records on each, paged and one read a job (AUDIT_ARGS).
# `make bench-scale` times claim, replay and status with 10k, 1M and 10M jobs stored (SCALE_ARGS).
# `make bench-cluster` compares 64 clients' fresh calls on Redis Clusters of 1 and 3 primaries
# that it starts itself (redis-server on the PATH; CLUSTER_ARGS to change it).
# `make transcode` runs one video through examples/transcode (TRANSCODE_ARGS, e.g. --count 5).
# `make simulate` runs 100,000 schedules of the deterministic simulation, one process a CPU
# (SIM_SEEDS to change the range, SIM_JOBS the processes).
# `make bench-rillflow` runs the Rill Flow executor end to end against the engine's sample
# executor, three runs (RILLFLOW_ARGS, e.g. --arms sample,redis --profile /tmp/rf-profile).
# `make soak` runs the example executor for 30 minutes at a steady rate with redos and resent
# callbacks, on a Redis server it starts itself, sampling RSS, file descriptors, store
# connections and callback latency every 10 s, and checks the store at the end (SOAK_ARGS,
# e.g. --store postgresql+psycopg://postgres@127.0.0.1:5432/soak --duration 600).
# `make dist` builds the wheel and sdist of the four distributions into dist/ and checks them
# (twine check --strict); `make wheel-check` installs them in a fresh virtual environment
# outside the clone and runs them there (.ci/wheel-check).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BENCH_REDIS ?= redis://127.0.0.1:6379/15  # a scratch database: the benchmark's jobs stay an hour
PACKAGES := -e '.[cli,testing,rillflow]' -e 'adapters/sql[postgres,mariadb]' -e 'adapters/s3[typing]' -e adapters/redis

.PHONY: demo test lint docs simulate dist wheel-check bench bench-gc bench-audit bench-scale bench-cluster bench-rillflow transcode soak

$(VENV)/.installed: pyproject.toml adapters/*/pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt $(PACKAGES)
	touch $@

demo: $(VENV)/.installed
	$(BIN)/rill-executor demo

transcode: $(VENV)/.installed
	$(BIN)/python -m examples.transcode.run $(TRANSCODE_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -n 4 --dist loadscope

simulate: $(VENV)/.installed
	$(BIN)/python -m tests.simulation --seeds $(or $(SIM_SEEDS),0:100000) $(if $(SIM_JOBS),--jobs $(SIM_JOBS))

DISTRIBUTIONS := . adapters/sql adapters/redis adapters/s3

dist: $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-dist.txt
	rm -rf dist
	for project in $(DISTRIBUTIONS); do $(BIN)/python -m build --no-isolation --outdir dist $$project || exit 1; done
	$(BIN)/twine check --strict dist/*

wheel-check: dist
	.ci/wheel-check

docs: $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-docs.txt
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

bench: $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-bench.txt
	$(BIN)/python benchmarks/bench_sql.py
	$(BIN)/python benchmarks/bench_redis.py --url $(BENCH_REDIS)
	$(BIN)/python benchmarks/bench_decorator.py
	$(BIN)/python benchmarks/bench_tracing.py

bench-gc: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_gc.py $(GC_ARGS)

bench-audit: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_audit.py $(AUDIT_ARGS)

bench-scale: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_scale.py $(SCALE_ARGS)

bench-cluster: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_cluster.py $(CLUSTER_ARGS)

bench-rillflow: $(VENV)/.installed
	$(BIN)/pip install --quiet -r requirements-bench.txt
	$(BIN)/python benchmarks/bench_rillflow.py --runs 3 --redis-url $(BENCH_REDIS) $(RILLFLOW_ARGS)

soak: $(VENV)/.installed
	$(BIN)/python benchmarks/soak.py $(SOAK_ARGS)
