# The course in two commands:  `make lab` opens it, `make test` checks all of it.
# Each builds .venv on first use (Python 3.10+ and pip are all it needs).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.fromscratch-installed
# torch is installed first and on its own, so that pip does not pick a build for us.
# Any torch 2.x works: `make lab TORCH=torch` takes the newest from PyPI.
TORCH ?= torch==2.13.0
LAB_ARGS ?=
PORT ?= 8000
SITE ?= _site
DOCS_SRC ?= build/docs-src
SERVE_ARGS ?=

.PHONY: lab test test-kernels install export readme docs serve-docs bench mutants clean

install: $(STAMP)

# The first run takes 2 to 5 minutes and says what each step installs and how long it took; later runs
# start at once. `make install` does only this part.
STEP = @echo "== set-up, step $(1) of 3: $(2)"; date +%s > $(VENV)/.step-start
DONE = @echo "   done in $$(( $$(date +%s) - $$(cat $(VENV)/.step-start) )) s"
$(STAMP): setup.py settings.ini
	@echo "Setting up the course in $(VENV): first run only, 2 to 5 minutes, nothing to answer."
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(call STEP,1,$(TORCH) - the CPU build of about 200 MB (under a minute to 2 minutes))
	@$(PY) -m pip install --quiet "$(TORCH)"
	$(DONE)
	$(call STEP,2,the kit and its tools - numpy and JupyterLab and nbdev and pytest and Sphinx (1 to 3 minutes))
	@$(PY) -m pip install --quiet -e ".[dev]"
	@install -m 755 tools/nbdev_export $(VENV)/bin/nbdev_export  # nbdev 2 appends on re-export (tools/export.py)
	$(DONE)
	$(call STEP,3,the notebooks' Python 3 kernel (a few seconds))
	@$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ipykernel)" >/dev/null
	$(DONE)
	@rm -f $(VENV)/.step-start
	@touch $(STAMP)
	@echo "The course is set up: 'make lab' opens it, 'make test' checks all of it."

# The course's own lab settings (tools/jupyter: open the index, no news prompt, nothing fetched) are added
# to JUPYTER_CONFIG_PATH for this command only; your global Jupyter settings are left alone.
lab: $(STAMP)
	JUPYTER_CONFIG_PATH="$(CURDIR)/tools/jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	$(VENV)/bin/jupyter lab --notebook-dir=nbs $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

test: $(STAMP)
	$(PY) -m pytest

# The notebooks again under other OpenBLAS kernels: a stored output must not depend on the CPU's BLAS code.
KERNELS ?= Prescott Haswell Zen SkylakeX
test-kernels: $(STAMP)
	for k in $(KERNELS); do echo "== nbval with OPENBLAS_CORETYPE=$$k"; OPENBLAS_CORETYPE=$$k $(PY) -m pytest nbs -q || exit 1; done

# Re-run notebooks (all, or NB=nbs/01_matmul.ipynb), clean them, export the package and README.md.
export: $(STAMP)
	$(PY) tools/refresh.py $(NB)

readme: $(STAMP)
	$(PY) tools/readme.py

# The documentation site, offline: Sphinx + MyST-NB + sphinx-book-theme build every notebook, from its stored
# outputs, into $(SITE)/ (docs/conf.py; nbdev's processors prepare the notebooks into $(DOCS_SRC)/ first).
docs: $(STAMP)
	$(PY) tools/docs.py build $(SITE) --src $(DOCS_SRC)

# Serve $(SITE)/ on http://127.0.0.1:$(PORT)/ for your browser (builds it first if it is missing).
serve-docs: $(STAMP)
	$(PY) tools/docs.py serve $(SITE) --port $(PORT) $(SERVE_ARGS)

# Benchmarks against torch and hand-written numpy, side by side in one run (BENCH_ARGS=--quick for a fast look).
bench: $(STAMP)
	$(PY) -m fromscratch.bench $(BENCH_ARGS)

# Mutation testing of the engine, ops and optimizers against the fast tests (setup.cfg says which): prints the
# kill rate and every surviving mutant. Slow (about 1.5 hours on 2 cores), so not part of `make test` or CI.
MUTANT_JOBS ?= 2
mutants: $(STAMP)
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children $(MUTANT_JOBS)
	$(PY) tools/mutants.py

clean:
	rm -rf $(VENV) _docs _site _proc build dist *.egg-info mutants
