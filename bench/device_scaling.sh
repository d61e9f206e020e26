#!/usr/bin/env bash
# The many-core checks of issue 41 as one prepared run on a lent machine (16 cores there).
#
# A lent machine is bare apart from Python 3.12 with numpy, scipy, Cython and meson, reaches
# no package index, and its time is short (minutes, every start counted), so everything it
# lacks travels with the working tree and the run is one command:
#
#   here:   bash bench/device_scaling.sh prep        # the wheels it lacks -> .device_wheels/ (ignored)
#   there:  device `run` with carry [".device_wheels"], timeout_s 540:
#           bash bench/device_scaling.sh run
#
# `run` builds the package (no build isolation: the machine's numpy, scipy, Cython and meson),
# then `bench/scaling.py` (every kernel's share of the machine's ceiling at 1 and 16 threads),
# `bench/scaling_parts.py` (the parts of the kernels that fall short, against the DGEMM and the
# memory-bandwidth ceilings) and `bench/serial_share.py` (the serial part's Amdahl model),
# each under its own time limit
# so that a slow one still leaves the other's output.  Everything lands in $OUT (logs and the
# tables); without $OUT, in bench/out/device.  Environment: THREADS (default "1 16"), REPEAT
# (default 3), QUICK=1 (a tenth of the rows: a check of this script on a small machine), PARTS=0
# (scaling.py alone: a short confirmation run),
# PYVER for `prep` (the lent machine's Python, default 3.12).
set -u -o pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
wheels="$here/.device_wheels"

case "${1:-}" in
prep)
    # only what the machine lacks: meson-python and its own dependencies, ninja, and
    # scikit-learn / threadpoolctl (runtime); numpy and scipy are there already
    mkdir -p "$wheels"
    python3 -m pip download -q --no-deps -d "$wheels" --only-binary=:all: \
        --python-version "${PYVER:-3.12}" --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux_2_28_x86_64 --platform any \
        meson-python pyproject-metadata packaging ninja scikit-learn joblib cloudpickle threadpoolctl narwhals
    du -sh "$wheels"
    ;;
run)
    out="${OUT:-$here/bench/out/device}"
    mkdir -p "$out"
    export PYTHONUNBUFFERED=1
    # no venv: the lent machine's python3 is itself a venv (its numpy, scipy, Cython and meson
    # in that venv's site-packages, which a --system-site-packages venv would not see), so
    # what it lacks goes to a --target folder on PYTHONPATH, and the package is built there too
    site=$(mktemp -d)/site
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    {
        echo "== machine"; nproc; lscpu | grep -E 'Model name|Socket|Thread|Core|NUMA node\(s\)|L3' || true
        python3 -c "import sys; print(sys.version); print(sys.prefix)"
        for m in numpy scipy Cython mesonbuild ninja sklearn threadpoolctl; do
            python3 -c "import $m" 2>/dev/null || echo "lacks $m"
        done
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
            "$wheels"/meson_python-*.whl "$wheels"/pyproject_metadata-*.whl &&
        { python3 -c "import ninja" 2>/dev/null || command -v ninja >/dev/null ||
          python3 -m pip install -q --no-index --no-deps --target "$site" "$wheels"/ninja-*.whl; } &&
        { python3 -c "import sklearn, threadpoolctl" 2>/dev/null ||
          python3 -m pip install -q --no-index --no-deps --target "$site" "$wheels"/scikit_learn-*.whl \
              "$wheels"/threadpoolctl-*.whl "$wheels"/joblib-*.whl; } &&
        export PATH="$site/bin:$PATH" &&
        python3 -m pip install -q --no-index --no-build-isolation --no-deps --target "$site" "$here" &&
        python3 -c "import dpem_fast, numpy, scipy; print('dpem_fast', dpem_fast.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)"
    } > "$out/build.log" 2>&1 || { echo "build failed: see $out/build.log"; tail -30 "$out/build.log"; exit 1; }
    tail -8 "$out/build.log"
    cd "$out" || exit 1          # (not the tree: the installed package, not the sources, is imported)
    quick=(); [ "${QUICK:-0}" = 1 ] && quick=(--quick)
    scale=0.25; [ "${QUICK:-0}" = 1 ] && scale=0.02     # (serial_share: 16e6 rows at scale 1)
    threads=(${THREADS:-1 16})
    echo "== scaling.py --threads ${threads[*]}"
    timeout 330 python3 "$here/bench/scaling.py" --threads "${threads[@]}" --repeat "${REPEAT:-3}" "${quick[@]}" \
        2>&1 | tee "$out/scaling.txt"
    [ "${PARTS:-1}" = 1 ] || { echo "(PARTS=0: no scaling_parts.py, no serial_share.py)"; exit 0; }
    echo "== scaling_parts.py --threads 1 ${threads[-1]}"
    timeout 200 python3 "$here/bench/scaling_parts.py" --threads 1 "${threads[-1]}" --repeat "${REPEAT:-3}" \
        "${quick[@]}" 2>&1 | tee "$out/scaling_parts.txt"
    echo "== serial_share.py --threads ${threads[-1]}"
    timeout 150 python3 "$here/bench/serial_share.py" --threads "${threads[-1]}" --repeat "${REPEAT:-3}" \
        --scale "$scale" 2>&1 | tee "$out/serial_share.txt"
    ;;
*)
    echo "usage: bash bench/device_scaling.sh prep|run" >&2
    exit 2
    ;;
esac
