package audio

import (
	"context"
	"errors"
	"testing"
	"time"

	"talkbox/engine"
)

// fakeDevices stands in for the system's device list and device opening:
// listed devices open unless named in broken, which fail as a real device
// does (Open falls back to the null backend with the reason).
type fakeDevices struct {
	list   []Output
	broken map[string]bool
	opened []string // "" = the default device
}

func (f *fakeDevices) outputs() ([]Output, error) { return f.list, nil }

func (f *fakeDevices) open(dev *Output, _ func([]float32), _ bool) (*output, error, error) {
	name := ""
	if dev != nil {
		name = dev.Name
	}
	f.opened = append(f.opened, name)
	if f.broken[name] {
		return &output{backend: "null"}, errors.New("device busy"), nil
	}
	return &output{backend: "default"}, nil, nil
}

func fakePlayer(t *testing.T, f *fakeDevices) *Player {
	t.Helper()
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.out.close(); err != nil { // the real null device; the fake takes over
		t.Fatal(err)
	}
	p.forceNull, p.list, p.open = false, f.outputs, f.open
	p.out, p.fellBack = &output{backend: "default"}, nil
	return p
}

func TestFindOutput(t *testing.T) {
	list := []Output{{Name: "Speakers", Default: true}, {Name: "USB headset"}}
	if o, err := FindOutput(list, ""); err != nil || o.Name != "" {
		t.Errorf(`"" = %+v, %v; want the system default`, o, err)
	}
	if o, err := FindOutput(list, "USB headset"); err != nil || o.Name != "USB headset" {
		t.Errorf("USB headset = %+v, %v", o, err)
	}
	if _, err := FindOutput(list, "HDMI"); !errors.Is(err, ErrNoOutput) {
		t.Errorf("HDMI: err %v, want ErrNoOutput", err)
	}
}

// Choosing a listed device opens it; one that has gone (unplugged) is an
// ErrNoOutput and leaves the device alone; one that fails to open puts
// playback back on the system default, never on nothing.
func TestUseOutput(t *testing.T) {
	f := &fakeDevices{list: []Output{{Name: "Speakers", Default: true}, {Name: "USB headset"}, {Name: "HDMI"}},
		broken: map[string]bool{"HDMI": true}}
	p := fakePlayer(t, f)
	if err := p.UseOutput("USB headset"); err != nil {
		t.Fatal(err)
	}
	if p.Output() != "USB headset" || p.NoDevice() || f.opened[len(f.opened)-1] != "USB headset" {
		t.Fatalf("after choosing USB headset: output %q, opened %q", p.Output(), f.opened)
	}
	n := len(f.opened)
	if err := p.UseOutput("Bluetooth"); !errors.Is(err, ErrNoOutput) {
		t.Fatalf("a device not listed: err %v, want ErrNoOutput", err)
	}
	if p.Output() != "USB headset" || len(f.opened) != n {
		t.Fatalf("a missing device changed the output: %q, opened %q", p.Output(), f.opened)
	}
	err := p.UseOutput("HDMI")
	if err == nil {
		t.Fatal("a device that fails to open: no error")
	}
	if p.Output() != "" || p.NoDevice() || f.opened[len(f.opened)-1] != "" {
		t.Fatalf("after HDMI failed: output %q, no device %v, opened %q; want the system default", p.Output(), p.NoDevice(), f.opened)
	}
	if err := p.UseOutput(""); err != nil || p.Output() != "" {
		t.Fatalf("back to the default: %q, %v", p.Output(), err)
	}
}

// With audio forced off no device is listed or opened.
func TestOutputsForcedNull(t *testing.T) {
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if list, err := p.Outputs(); err != nil || len(list) != 0 {
		t.Fatalf("forced null lists %v, %v", list, err)
	}
	if err := p.UseOutput("Speakers"); !errors.Is(err, ErrNoOutput) {
		t.Fatalf("forced null: UseOutput err %v, want ErrNoOutput", err)
	}
}

// Changing the device in the middle of an utterance (here the null device
// for itself): playback goes on with the next sample, so the whole second
// is played and Play returns normally.
func TestUseOutputWhilePlaying(t *testing.T) {
	p, err := Open(Options{ForceNull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ch := make(chan engine.Chunk, 1)
	ch <- engine.Chunk{PCM: tone(SampleRate, 200, 0.3), Final: true}
	close(ch)
	done := make(chan error, 1)
	var res Result
	go func() {
		var err error
		res, err = p.Play(context.Background(), ch, PlayOptions{})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := p.UseOutput(""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Play did not return after the device change")
	}
	if res.Played != time.Second {
		t.Errorf("played %v of 1s across the device change", res.Played)
	}
}
