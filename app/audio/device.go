package audio

// #include <stdlib.h>
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strconv"
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

// Output is a playback device as the system lists it.
type Output struct {
	Name    string // unique in one listing (a repeated name gets " (2)")
	Default bool   // the system's default device
	id      malgo.DeviceID
}

// ErrNoOutput is returned by Player.UseOutput for a device the system does
// not list (unplugged since it was chosen).
var ErrNoOutput = errors.New("no such output device")

// FindOutput picks the device called name from list; "" is the system
// default (ok, with a zero Output).
func FindOutput(list []Output, name string) (Output, error) {
	if name == "" {
		return Output{}, nil
	}
	for _, o := range list {
		if o.Name == name {
			return o, nil
		}
	}
	return Output{}, fmt.Errorf("%w: %q", ErrNoOutput, name)
}

// alsaNullID is the hex id of ALSA's "null" device ("Discard all samples
// (playback)…"), which ALSA lists even where there is no sound card; it is
// not an output anyone picks, so the list leaves it out.
const alsaNullID = "6e756c6c" // "null"

// listOutputs asks miniaudio (its usual backend order, as openBackend
// uses) for the playback devices.
func listOutputs() ([]Output, error) {
	quietALSA()
	ctx, err := malgo.InitContext(nil, malgo.ContextConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("audio: listing devices: %w", err)
	}
	defer func() { _ = ctx.Uninit(); ctx.Free() }()
	infos, err := ctx.Devices(malgo.Playback)
	if err != nil {
		return nil, fmt.Errorf("audio: listing devices: %w", err)
	}
	list := make([]Output, 0, len(infos))
	seen := map[string]int{}
	for i := range infos {
		if infos[i].ID.String() == alsaNullID {
			continue
		}
		name := strings.TrimSpace(infos[i].Name())
		if name == "" {
			name = "Device " + strconv.Itoa(i+1)
		}
		if seen[name]++; seen[name] > 1 {
			name += " (" + strconv.Itoa(seen[name]) + ")"
		}
		list = append(list, Output{Name: name, Default: infos[i].IsDefault != 0, id: infos[i].ID})
	}
	return list, nil
}

// output is an open, started malgo playback device feeding from fill.
type output struct {
	ctx     *malgo.AllocatedContext
	dev     *malgo.Device
	backend string
}

// openOutput opens the device dev (nil: the default), or the null backend
// when forceNull is set or no real device opens. fellBack carries why the
// real device failed.
func openOutput(dev *Output, fill func([]float32), forceNull bool) (out *output, fellBack error, err error) {
	if !forceNull {
		quietALSA()
		out, err := openBackend(nil, dev, fill)
		if err == nil {
			return out, nil, nil
		}
		fellBack = err
	} else {
		fellBack = fmt.Errorf("%s=null", EnvAudio)
	}
	out, err = openBackend([]malgo.Backend{backendNull}, nil, fill)
	if err != nil {
		return nil, fellBack, fmt.Errorf("audio: null backend: %w (default device: %v)", err, fellBack)
	}
	return out, fellBack, nil
}

// openBackend opens dev (nil: the backend's default device).
func openBackend(backends []malgo.Backend, dev *Output, fill func([]float32)) (*output, error) {
	name := "default"
	if len(backends) == 1 && backends[0] == backendNull {
		name = "null"
	} else if dev != nil {
		name = strconv.Quote(dev.Name)
	}
	ctx, err := malgo.InitContext(backends, malgo.ContextConfig{}, nil)
	if err != nil {
		return nil, fmt.Errorf("audio: %s backend context: %w", name, err)
	}
	cfg := malgo.DefaultDeviceConfig(malgo.Playback)
	cfg.Playback.Format = malgo.FormatF32
	cfg.Playback.Channels = 1
	cfg.SampleRate = SampleRate
	cfg.PeriodSizeInMilliseconds = 20
	if dev != nil {
		// malgo copies the id into C memory; miniaudio reads it during init.
		id := dev.id.Pointer()
		defer C.free(id)
		cfg.Playback.DeviceID = id
	}
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
	d, err := malgo.InitDevice(ctx.Context, cfg, callbacks)
	if err != nil {
		_ = ctx.Uninit()
		ctx.Free()
		return nil, fmt.Errorf("audio: %s playback device: %w", name, err)
	}
	if err := d.Start(); err != nil {
		d.Uninit()
		_ = ctx.Uninit()
		ctx.Free()
		return nil, fmt.Errorf("audio: start %s playback device: %w", name, err)
	}
	backend := "default"
	if name == "null" {
		backend = "null"
	}
	return &output{ctx: ctx, dev: d, backend: backend}, nil
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
