#!/usr/bin/env bash
# A/B benches (on the device, after tools/gpu/devcheck.sh has unpacked
# talkbox-portable and made /tmp/s06) over library builds (LIBS) x bench flag
# sets (ARGSETS, ';'-separated, each a space-separated list such as
# "--fused-max-len -1 --prefill passes") x prompt rows (ROWS).
TB=/tmp/talkbox-portable
IFS=';' read -r -a sets <<<"${ARGSETS:- }"
for rep in $(seq ${REPS:-1}); do
for lib in ${LIBS}; do
  for args in "${sets[@]}"; do
    for rows in ${ROWS:-40}; do
      # shellcheck disable=SC2086
      r=$(TALKBOX_NATIVE=$lib timeout 120 $TB bench --model /tmp/s06 --backend cuda $args --frames 10 --codec-frames 0 --prompt-rows $rows 2>/dev/null |
        python3 -c "import json,sys; r=json.load(sys.stdin); print('talker=%.4f predictor=%.4f frame=%.4f greedy=%.4f' % (r['talker_step_ms'], r['predictor_step_ms'], r['frame_ms'], r['frame_greedy_ms']))" 2>&1)
      echo "$(basename $lib) rows=$rows [$args] $r"
    done
  done
done
done
