package audio

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/gen2brain/malgo"
)

// SampleRate is the rate the engine produces and the device is opened at;
// miniaudio resamples to the hardware rate itself.
const SampleRate = 24000

// backendNull is miniaudio's real null backend. malgo v0.11.24 declares
// BackendNull as 13, which is miniaudio's *custom* backend and fails with
// "No backend"; the null backend is 14 (docs/design/platform.md, Audio).
const backendNull malgo.Backend = 14

// NoDeviceMessage is what the window shows when playback fell back to the
// null backend.
const NoDeviceMessage = "No audio output device; audio will be discarded"

// EnvAudio names the variable that forces the null backend (TALKBOX_AUDIO=null),
// so tests and headless runs never touch a sound card.
const EnvAudio = "TALKBOX_AUDIO"

// NullRequested reports whether the environment asks for the null backend.
func NullRequested() bool {
	return strings.EqualFold(strings.TrimSpace(os.Getenv(EnvAudio)), "null")
}

// output is an open, started malgo playback device feeding from fill.
type output struct {
	ctx     *malgo.AllocatedContext
	dev     *malgo.Device
	backend string
}

// openOutput opens the default device, or the null backend when forceNull is
// set or no real device opens. fellBack carries why the real device failed.
func openOutput(fill func([]float32), forceNull bool) (out *output, fellBack error, err error) {
	if !forceNull {
		quietALSA()
		out, err := openBackend(nil, "default", fill)
		if err == nil {
			return out, nil, nil
		}
		fellBack = err
	} else {
		fellBack = fmt.Errorf("%s=null", EnvAudio)
	}
	out, err = openBackend([]malgo.Backend{backendNull}, "null", fill)
	if err != nil {
		return nil, fellBack, fmt.Errorf("audio: null backend: %w (default device: %v)", err, fellBack)
	}
	return out, fellBack, nil
}

func openBackend(backends []malgo.Backend, name string, fill func([]float32)) (*output, error) {
	ctx, err := malgo.InitContext(backends, malgo.ContextConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("audio: %s backend context: %w", name, err)
	}
	cfg := malgo.DefaultDeviceConfig(malgo.Playback)
	cfg.Playback.Format = malgo.FormatF32
	cfg.Playback.Channels = 1
	cfg.SampleRate = SampleRate
	cfg.PeriodSizeInMilliseconds = 20
	callbacks := malgo.DeviceCallbacks{
		// Runs on miniaudio's real-time thread: view the bytes as float32
		// and let the ring fill them; nothing else happens here.
		Data: func(pOut, _ []byte, frames uint32) {
			n := int(frames)
			if n <= 0 || len(pOut) < n*4 {
				return
			}
			fill(unsafe.Slice((*float32)(unsafe.Pointer(&pOut[0])), n))
		},
	}
	dev, err := malgo.InitDevice(ctx.Context, cfg, callbacks)
	if err != nil {
		_ = ctx.Uninit()
		ctx.Free()
		return nil, fmt.Errorf("audio: %s playback device: %w", name, err)
	}
	if err := dev.Start(); err != nil {
		dev.Uninit()
		_ = ctx.Uninit()
		ctx.Free()
		return nil, fmt.Errorf("audio: start %s playback device: %w", name, err)
	}
	return &output{ctx: ctx, dev: dev, backend: name}, nil
}

func (o *output) close() error {
	if o == nil || o.dev == nil {
		return nil
	}
	var errs []error
	if err := o.dev.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("audio: stop device: %w", err))
	}
	o.dev.Uninit()
	if err := o.ctx.Uninit(); err != nil {
		errs = append(errs, fmt.Errorf("audio: uninit context: %w", err))
	}
	o.ctx.Free()
	o.dev = nil
	return errors.Join(errs...)
}
