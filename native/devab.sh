#!/usr/bin/env bash
# A/B benches (on the device, after native/devcheck.sh has unpacked
# talkbox-portable and made /tmp/s06) over library builds (LIBS) x run-time switch sets (ENVSETS,
# ';'-separated, each a space-separated VAR=v list) x prompt rows (ROWS).
TB=/tmp/talkbox-portable
IFS=';' read -r -a sets <<<"${ENVSETS:-X=1}"
for rep in $(seq ${REPS:-1}); do
for lib in ${LIBS}; do
  for env in "${sets[@]}"; do
    for rows in ${ROWS:-40}; do
      r=$(env $env TALKBOX_NATIVE=$lib timeout 120 $TB bench --model /tmp/s06 --backend cuda --frames 10 --codec-frames 0 --prompt-rows $rows 2>/dev/null |
        python3 -c "import json,sys; r=json.load(sys.stdin); print('talker=%.4f predictor=%.4f frame=%.4f greedy=%.4f' % (r['talker_step_ms'], r['predictor_step_ms'], r['frame_ms'], r['frame_greedy_ms']))" 2>&1)
      echo "$(basename $lib) rows=$rows [$env] $r"
    done
  done
done
done
