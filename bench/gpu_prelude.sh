# The device tool's prelude for GPU runs (bench/*.py): installs the carried wheels (.whl/) that the
# machine lacks into /tmp/site and puts src/ on the path. Usage: source bench/gpu_prelude.sh
mkdir -p /tmp/site
for p in sklearn:scikit_learn scipy:scipy joblib:joblib threadpoolctl:threadpoolctl platformdirs:platformdirs; do
  m=${p%%:*}; w=${p##*:}
  python3 -c "import $m" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/$w-*.whl
done
export PYTHONPATH=/tmp/site:$PWD/src:$PWD
python3 -c "import sklearn, scipy, numpy, torch, triton; print('versions', sklearn.__version__, scipy.__version__, numpy.__version__, torch.__version__, triton.__version__)"
