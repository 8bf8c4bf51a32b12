#!/usr/bin/env bash
# GPU check (issue 34): keras-bert's GPU paths on one GPU in under 8 minutes, one table.
#
#   benchmarks/gpu_check.sh               on a machine with a GPU and TensorFlow
#   benchmarks/gpu_check.sh --dry-run     the same plumbing, tiny, on a CPU (or GPU_CHECK_DRY=1)
#   benchmarks/gpu_check.sh --parts throughput     one part again (env always runs)
#
# Runs the GPU tests (pytest -m gpu tests/gpu), the Colab notebooks on their GPU path, and
# BERT-base fine-tuning throughput at seq_length 128 in float32, mixed_bfloat16 and
# mixed_float16 against keras-hub; benchmarks/gpu_check.py says what each part does and its time
# budget. Prints one markdown table; with $OUT set (the device tool's output folder) it also
# writes $OUT/gpu_check.md, gpu_check.json and gpu_check.log. PYTHON picks the interpreter
# (default python3, the one that holds PyTorch and JAX on the device machines).
#
# Where TensorFlow comes from. The device machines lent here (one H100 or H200, Python 3.12)
# have no TensorFlow, no network, and take at most 64 MiB of files per call. This script
# installs any wheels found in .whl/ (carried there, see the device README's recipe) into
# /tmp/site first. But the wheels a GPU run of TensorFlow needs do not fit: tensorflow 2.21.0
# for cp312 is 573 MB on its own, tensorflow-text 60 MB, and the CUDA 12 wheels of
# tensorflow[and-cuda] 2,807 MB (cuDNN 717, cuBLAS 581, cuSPARSE 366, NCCL 352, cuSOLVER 338,
# cuFFT 201, ...; the machines' own CUDA libraries are CUDA 13, which TensorFlow 2.21 cannot
# load): 3.4 GB, 52 calls of 64 MiB. Sent over several calls while the machine stays warm (30 s
# after each), that is 5 to 9 minutes of calls before the check starts, plus 1 to 2 to start
# the machine, against 15 minutes of device time a task gets: it does not fit, and a call late
# by 30 s loses the machine and what was sent. So this has not run on a GPU yet; it runs as it
# is on a machine whose image has tensorflow[and-cuda] 2.21 (benchmarks/README.md, "GPU check").
#
# Exit status: 0 every check passed or was skipped for a stated reason; 1 a check failed or ran
# out of time; 3 no TensorFlow, or (without --dry-run) TensorFlow sees no GPU.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}

if compgen -G ".whl/*.whl" >/dev/null; then
    site=${GPU_CHECK_SITE:-/tmp/site}
    if [ ! -e "$site/.gpu_check_installed" ]; then
        echo "gpu_check: installing the carried wheels in .whl/ into $site" >&2
        if ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
                --upgrade --target "$site" .whl/*.whl; then
            echo "gpu_check: pip could not install .whl/*.whl into $site" >&2
            exit 3
        fi
        touch "$site/.gpu_check_installed"
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

if ! import_error=$("$PYTHON" -c "import tensorflow" 2>&1); then
    echo "gpu_check: $PYTHON ($("$PYTHON" -V 2>&1)) cannot import TensorFlow:" \
         "$(printf '%s\n' "$import_error" | grep -v '^[[:space:]]*$' | tail -n 1)" >&2
    echo "gpu_check: install tensorflow[and-cuda]==2.21.0, tensorflow-text and keras 3.15 for" \
         "it, or carry their wheels in .whl/; benchmarks/README.md, \"GPU check\", says why the" \
         "device machines lent here cannot get them." >&2
    exit 3
fi
exec "$PYTHON" -m benchmarks.gpu_check --python "$PYTHON" "$@"
