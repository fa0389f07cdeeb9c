# race_nb — the README's two commands are `make demo` and `make test`.
# Each creates .venv when missing (idempotent), installs torch first, then the package.
# GPU users choose another torch build:  make test TORCH_SPEC="torch==2.13.0" TORCH_INDEX=https://download.pytorch.org/whl/cu128
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
STAMP := $(VENV)/.race_nb-installed
# pytest-xdist workers: one per usable core, at most 4 (0: serial); each worker is pinned to its own share of the cores
# (tests/conftest.py), so the grids a test runs size themselves to it. Measured in bench/SUITE.md (make bench-suite).
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); if [ $$n -ge 2 ]; then echo $$(( n > 4 ? 4 : n )); else echo 0; fi)
PYTEST_XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup)
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM ?= false
export RACE_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: setup lint demo site test readme results-readmes export clean-nbs check-export check-clean nbtest pytest pytest-main pytest-slurm lab bench bench-suite gpu-check gpu-bundle

setup: $(STAMP)

$(STAMP): settings.ini setup.py pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip
	$(BIN)/python -m pip install -qq "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install -qq -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name race_nb --display-name "race_nb" >/dev/null
	@touch $(STAMP)
	@echo "race_nb environment ready in $(VENV) (kernel: race_nb)"

demo: setup
	$(BIN)/race demo

site: setup  # the report of the demo grid (run first when missing) and every chapter executed, into _site/
	$(BIN)/race site

# make test: nbdev_test, then pytest's main part, then the Slurm tests alone. (nbdev_test beside pytest was measured slower
# on 2 cores: bench/SUITE.md.)
test: setup check-export check-clean lint nbtest pytest-main pytest-slurm
	@echo "make test: all checks passed"

lint: setup  # unused imports and names (ruff.toml): the package as nbdev exports it, the tests and the benchmarks
	$(BIN)/ruff check race_nb tests bench

check-export: setup
	@.ci/unchanged race_nb -- $(BIN)/nbdev_export

check-clean: setup
	@.ci/unchanged nbs -- $(BIN)/nbdev_clean

nbtest: setup
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/nbdev_test --do_print --timing

pytest: pytest-main pytest-slurm

pytest-main: setup
	$(BIN)/python -m pytest -q --durations=25 $(PYTEST_XDIST) -m "not slurm" tests

pytest-slurm: setup  # the Slurm tests, alone: their jobs use the cores Slurm gives them, not a pytest worker's
	RACE_TEST_OWN_SERVERS=1 $(BIN)/python -m pytest -q --durations=5 -m slurm tests

export: setup
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean

readme: setup  # README.md from nbs/index.ipynb (nbdev_readme where Quarto exists)
	if command -v quarto >/dev/null; then $(BIN)/nbdev_readme; else $(BIN)/jupyter nbconvert --log-level=ERROR --to markdown nbs/index.ipynb --output-dir . --output README; fi

results-readmes: setup  # the computed part of each results/*/README.md that reports the study (race_nb.reproduction.write_readmes)
	$(BIN)/python -c "from race_nb.reproduction import write_readmes; print('rewritten:', write_readmes() or 'none')"

lab: setup
	$(BIN)/jupyter lab nbs

bench: setup
	$(BIN)/python bench/run.py

bench-suite: setup  # times make test's nbdev_test and pytest, per notebook and per test, into bench/SUITE.md (compared with the run before)
	$(BIN)/python bench/suite.py --workers $(PYTEST_WORKERS)

gpu-check: setup  # the staged GPU smoke test (S1 worst-cell memory, S2 RNG + grid resume on CUDA, S3 ledger vs FlopCounterMode): bench/gpu_check/
	$(BIN)/python bench/gpu_check.py

gpu-bundle: setup  # wheels and data for bench/gpu_check.py on a bare GPU machine without network (gpu-bundle/, at most 64 MiB)
	$(BIN)/python bench/gpu_bundle.py
