# Developer tasks; .ci/run uses the same commands.
.PHONY: install format lint typecheck test test-fast bench bench-learning docs ci

install:
	uv sync --locked

format:
	uv run ruff format .
	uv run ruff check --fix .

lint:
	uv run ruff check .
	uv run ruff format --check .

typecheck:
	uv run mypy

test:
	uv run pytest

test-fast:
	uv run pytest -m "not slow"

# Every benchmark a doc quotes, one after the other, and one table of figures and targets.
bench:
	uv run python benchmarks/run_all.py

# The whole learning pipeline, about 45 minutes on 2 CPU cores: kept out of `make bench`,
# which runs its warm start alone (`--warm-start`, against a floor).
bench-learning:
	uv run python benchmarks/bench_learning.py

docs:
	NO_MKDOCS_2_WARNING=1 uv run mkdocs build --strict

ci:
	bash .ci/run
