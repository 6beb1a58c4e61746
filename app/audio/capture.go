package audio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/gen2brain/malgo"
)

// ErrNoMicrophone is returned when no capture device opens (also when
// TALKBOX_AUDIO=null asks for no sound card).
var ErrNoMicrophone = errors.New("no microphone could be opened")

// Record captures mono audio at SampleRate from the default input device
// until ctx ends or max has been recorded. level is called about every
// 50 ms (from a goroutine) with the peak of the last block, 0..1, and the
// time recorded so far.
func Record(ctx context.Context, max time.Duration, level func(peak float32, elapsed time.Duration)) ([]float32, error) {
	if NullRequested() {
		return nil, fmt.Errorf("%w (%s=null)", ErrNoMicrophone, EnvAudio)
	}
	quietALSA()
	mctx, err := malgo.InitContext(nil, malgo.ContextConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMicrophone, err)
	}
	defer func() { _ = mctx.Uninit(); mctx.Free() }()
	limit := int(max.Seconds() * SampleRate)
	var (
		mu   sync.Mutex
		buf  = make([]float32, 0, limit)
		peak float32
		full = make(chan struct{})
		once sync.Once
	)
	cfg := malgo.DefaultDeviceConfig(malgo.Capture)
	cfg.Capture.Format = malgo.FormatF32
	cfg.Capture.Channels = 1
	cfg.SampleRate = SampleRate
	cfg.PeriodSizeInMilliseconds = 20
	dev, err := malgo.InitDevice(mctx.Context, cfg, malgo.DeviceCallbacks{
		// miniaudio's real-time thread: copy and note the peak, nothing else.
		Data: func(_, in []byte, frames uint32) {
			n := int(frames)
			if n <= 0 || len(in) < 4*n {
				return
			}
			s := unsafe.Slice((*float32)(unsafe.Pointer(&in[0])), n)
			mu.Lock()
			room := limit - len(buf)
			if n > room {
				s = s[:room]
			}
			buf = append(buf, s...)
			for _, v := range s {
				peak = max32(peak, float32(math.Abs(float64(v))))
			}
			done := len(buf) >= limit
			mu.Unlock()
			if done {
				once.Do(func() { close(full) })
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMicrophone, err)
	}
	defer dev.Uninit()
	if err := dev.Start(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMicrophone, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-full:
		case <-tick.C:
			if level != nil {
				mu.Lock()
				p, n := peak, len(buf)
				peak = 0
				mu.Unlock()
				level(p, time.Duration(n)*time.Second/SampleRate)
			}
			continue
		}
		break
	}
	_ = dev.Stop()
	mu.Lock()
	defer mu.Unlock()
	return append([]float32(nil), buf...), nil
}

func max32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}
