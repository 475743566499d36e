#!/usr/bin/env bash
# The parallel suite again with OpenBLAS's Haswell kernels, whose rows are cut at a step of 12
# rather than 48 (core/gemm.h): the bits must still not depend on the thread count. This VM's
# OpenBLAS picks its older Prescott kernels by default, so the default run never sees the
# Haswell step. Skipped (77) on a CPU without AVX2 and FMA, where those kernels cannot run.
set -euo pipefail
test_core=$1
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || { echo "no AVX2/FMA: skipped"; exit 77; }
OPENBLAS_CORETYPE=Haswell exec "$test_core" --run_test=parallel --log_level=test_suite --report_level=short
