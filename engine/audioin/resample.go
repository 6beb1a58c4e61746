package audioin

/*
#cgo LDFLAGS: -lsoxr
#include <soxr.h>
#include <stdlib.h>

// oneshot resamples mono float32 with SOXR_HQ, the quality librosa's default
// res_type "soxr_hq" selects through python-soxr.
static const char *oneshot(double in_rate, double out_rate, const float *in, size_t ilen,
                           float *out, size_t olen, size_t *odone) {
	soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
	soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
	soxr_error_t err = soxr_oneshot(in_rate, out_rate, 1, in, ilen, NULL, out, olen, odone, &io, &q, NULL);
	return err;
}
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Resample converts mono samples from rate `from` to rate `to` exactly as the
// official loader does (librosa.resample with its defaults): libsoxr at
// SOXR_HQ, float32 in and out, then the result zero-padded or trimmed at the
// end to ceil(n·to/from) samples (librosa.util.fix_length). Equal rates
// return a copy. The golden audio_resample case holds the official arrays;
// the README there measured libsoxr's one-shot call bit-identical to them.
func Resample(x []float32, from, to int) ([]float32, error) {
	if from <= 0 || to <= 0 {
		return nil, fmt.Errorf("audioin: resample from %d Hz to %d Hz", from, to)
	}
	if from == to || len(x) == 0 {
		return append([]float32(nil), x...), nil
	}
	want := OutputLength(len(x), from, to)
	// libsoxr may return a sample more or fewer than the exact ratio; leave
	// room and let fix_length's rule decide the final length.
	out := make([]float32, want+16)
	var done C.size_t
	if e := C.oneshot(C.double(from), C.double(to), (*C.float)(unsafe.Pointer(&x[0])), C.size_t(len(x)),
		(*C.float)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &done); e != nil {
		return nil, fmt.Errorf("audioin: libsoxr: %s", C.GoString(e))
	}
	out = out[:min(int(done), want)]
	for len(out) < want {
		out = append(out, 0)
	}
	return out, nil
}

// OutputLength is ceil(n·to/from), the length librosa fixes a resampled
// signal to, computed as librosa does (float64 ratio first, then the
// product), so the rare product that rounds just above an integer gets the
// same extra sample.
func OutputLength(n, from, to int) int {
	return int(math.Ceil(float64(n) * (float64(to) / float64(from))))
}
