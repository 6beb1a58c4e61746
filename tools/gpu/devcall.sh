#!/usr/bin/env bash
# One device call (the device tool runs it in the repository root, with .devbin/
# and .golden/ carried): tools/gpu/devcheck.sh, then the CUDA tests again with
# each library in TESTV (/tmp/tbv/NAME, built by devcheck's variants), then
# tools/gpu/devab.sh over ABLIBS. Example:
#   VARIANTS="x:-DTB_X=1" TESTV=x ABLIBS="$PWD/native/build /tmp/tbv/x" bash tools/gpu/devcall.sh
set -u
cd "$(dirname "$0")/../.."
STAGES="${STAGES:-build bench test prof variants}" OUT=$OUT bash tools/gpu/devcheck.sh > /tmp/dc.log 2>&1
grep -E "^ *talker_step|^== .*(bench|exit|fail)|^prof +(tk|cp) +(s-|sample|qkv|o |gateup|down|head|total)|^prof kind|stack frame" /tmp/dc.log | head -80
grep -E "^--- (PASS|FAIL)|^(PASS|FAIL)|GPU draws|max\|diff\|.*flips|cos" $OUT/test_cuda.log | head -40
for v in ${TESTV:-}; do
  echo "### tests $v"
  TALKBOX_NATIVE=/tmp/tbv/$v TALKBOX_GOLDEN=$PWD/.golden TALKBOX_CUDA_SYNTH=/tmp/s06 timeout 200 .devbin/cuda.test \
    -test.v -test.run "${TESTRUN:-Sampler|Teacher|GreedyCodes|RealShapes|Reproducible}" > /tmp/devlogs/test_$v.log 2>&1
  echo "exit $?"; grep -E "^--- (PASS|FAIL)|GPU draws|FAIL" /tmp/devlogs/test_$v.log | head -20
  cp /tmp/devlogs/test_$v.log $OUT/ 2>/dev/null
done
[ -n "${ABLIBS:-}" ] && REPS=${REPS:-3} ROWS="${ROWS:-40}" LIBS="$ABLIBS" bash tools/gpu/devab.sh
