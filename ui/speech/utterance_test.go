package speech

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"talkbox/app/audio"
	"talkbox/engine"
	"talkbox/ui/uitest"
)

// sink is a Player without a device: it takes the whole stream and keeps it.
type sink struct {
	chunks []engine.Chunk
	opt    audio.PlayOptions
}

func (s *sink) Play(ctx context.Context, ch <-chan engine.Chunk, o audio.PlayOptions) (audio.Result, error) {
	s.opt = o
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				return audio.Result{}, nil
			}
			s.chunks = append(s.chunks, c)
		case <-ctx.Done():
			return audio.Result{}, ctx.Err()
		}
	}
}

func runDone(t *testing.T, u *Utterance) Outcome {
	t.Helper()
	go u.Run(nil)
	select {
	case <-u.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the utterance did not finish")
	}
	return u.Outcome()
}

// Two sentences go to the engine one after the other and reach the player
// as one stream: no Final or Err inside it, every sample in order.
func TestSentencesStreamAsOne(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.05}
	p := &sink{}
	first, second := "Hello there.", "How are you?"
	u := New(7, first+" "+second, engine.Request{Voice: "ryan", Language: "english"}, fake, p, 0)
	end := runDone(t, u)
	if end.Err != nil || end.Stopped {
		t.Fatalf("outcome err %v stopped %v", end.Err, end.Stopped)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].Text != first || reqs[1].Text != second || reqs[1].Voice != "ryan" {
		t.Fatalf("requests %+v, want the two sentences with the voice", reqs)
	}
	frames := fake.FramesFor(first) + fake.FramesFor(second)
	samples := 0
	for _, c := range p.chunks {
		if c.Final || c.Err != nil {
			t.Fatalf("the player saw an inner Final/Err chunk: %+v", c)
		}
		samples += len(c.PCM)
	}
	if want := frames * uitest.FakeFrameSamples; samples != want || len(end.PCM) != want {
		t.Fatalf("player got %d samples, outcome kept %d, want %d", samples, len(end.PCM), want)
	}
	f := end.Figures
	if f.TTFC <= 0 || f.Frames != int64(frames) || f.Sentence != 2 || f.Sentences != 2 || !f.Synthesised || f.RTF <= 0 {
		t.Fatalf("figures %+v", f)
	}
	if len(f.Timeline) != frames {
		t.Errorf("timeline has %d marks, want one per chunk (%d)", len(f.Timeline), frames)
	}
	if p.opt.Tag != 7 {
		t.Errorf("play tag %d, want the utterance id 7", p.opt.Tag)
	}
}

func TestFailureKeepsAudioAndCause(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.05, FailAfter: 3}
	end := runDone(t, New(1, "This will fail.", engine.Request{Voice: "ryan"}, fake, &sink{}, 0))
	if end.Err == nil || !strings.Contains(end.Err.Error(), "sentence 1") || !strings.Contains(end.Err.Error(), "failing after 3") {
		t.Fatalf("err %v, want the sentence and the engine's cause", end.Err)
	}
	if end.Stopped || len(end.PCM) != 3*uitest.FakeFrameSamples {
		t.Fatalf("stopped %v, %d samples kept, want the 3 frames before the failure", end.Stopped, len(end.PCM))
	}
	end = runDone(t, New(2, "Hi.", engine.Request{Voice: "nobody"}, fake, &sink{}, 0))
	if end.Err == nil || !strings.Contains(end.Err.Error(), "nobody") {
		t.Fatalf("unknown voice: err %v", end.Err)
	}
}

// Cancel is a stop, not a failure, and the engine stream is cancelled.
func TestCancelStops(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 1}
	u := New(1, strings.Repeat("A long sentence ", 20)+"ends.", engine.Request{Voice: "ryan"}, fake, &sink{}, 0)
	go u.Run(nil)
	deadline := time.After(10 * time.Second)
	for u.Snapshot(audio.Live{}).TTFC < 0 {
		select {
		case <-deadline:
			t.Fatal("no first chunk")
		case <-time.After(5 * time.Millisecond):
		}
	}
	u.Cancel()
	select {
	case <-u.Done():
	case <-deadline:
		t.Fatal("Cancel did not end the utterance")
	}
	end := u.Outcome()
	if !end.Stopped || end.Err != nil {
		t.Fatalf("after Cancel: stopped %v err %v", end.Stopped, end.Err)
	}
	for fake.Cancelled() < 1 {
		select {
		case <-deadline:
			t.Fatal("the engine stream was not cancelled")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// The prebuffer follows the last measured RTF and the text's expected length.
func TestPrebufferFromLastRTF(t *testing.T) {
	text := strings.Repeat("word ", 40)
	if p := New(1, text, engine.Request{}, nil, nil, 0.5).Prebuffer(); p != 0 {
		t.Errorf("RTF 0.5: prebuffer %v, want none", p)
	}
	if p := New(1, text, engine.Request{}, nil, nil, 1.3).Prebuffer(); p <= 0 {
		t.Errorf("RTF 1.3: prebuffer %v, want some", p)
	}
}

func TestExpectedSeconds(t *testing.T) {
	for _, c := range []struct {
		text string
		want float64
	}{
		{"", 0},
		{"abcdefghijklmn", 1},     // 14 Latin characters
		{"a b\tc\n", 3.0 / 14},    // spaces do not count
		{"你好世界。", 4/4.5 + 1.0/14}, // CJK punctuation counts as Latin
	} {
		if got := expectedSeconds(c.text); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("expectedSeconds(%q) = %v, want %v", c.text, got, c.want)
		}
	}
}

// slowSink plays each chunk in real time for its length × pace, so the
// stream backs up and synthesis has to wait for it.
type slowSink struct{ pace float64 }

func (s *slowSink) Play(ctx context.Context, ch <-chan engine.Chunk, o audio.PlayOptions) (audio.Result, error) {
	for c := range ch {
		time.Sleep(time.Duration(s.pace * float64(len(c.PCM)) / audio.SampleRate * float64(time.Second)))
	}
	return audio.Result{}, nil
}

// Time spent waiting on a full playback buffer is shown apart and kept out
// of the RTF, which counts synthesis time only.
func TestRTFExcludesBufferWait(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.02}
	// Many sentences so far more chunks than the stream holds.
	text := strings.Repeat("A short sentence here. ", 12)
	u := New(1, text, engine.Request{Voice: "ryan"}, fake, &slowSink{pace: 0.25}, 0)
	end := runDone(t, u)
	if end.Err != nil {
		t.Fatal(end.Err)
	}
	f := end.Figures
	if f.BufferWait < 100*time.Millisecond {
		t.Fatalf("buffer wait %s: the slow player never held the synthesis back", f.BufferWait)
	}
	wallRTF := (f.BufferWait.Seconds() + f.RTF*f.Audio.Seconds()) / f.Audio.Seconds()
	if f.RTF > 0.2 || wallRTF < 0.15 {
		t.Fatalf("RTF %.3f with %s of buffer wait over %s of audio (wall RTF %.3f): want the synthesis-only figure near the engine's 0.02",
			f.RTF, f.BufferWait, f.Audio, wallRTF)
	}
}

// The sentence shown as spoken follows the playback position across the
// sentences' boundaries, which are counted in samples handed to the player.
func TestPlayingFollowsPlayback(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.01}
	sentences := []string{"One.", "Sentence two is longer.", "Three, the last one."}
	u := NewSentences(3, strings.Join(sentences, " "), sentences, engine.Request{Voice: "ryan"}, fake, &sink{}, 0)
	end := runDone(t, u)
	if end.Err != nil || u.Text() != strings.Join(sentences, " ") {
		t.Fatalf("err %v, text %q", end.Err, u.Text())
	}
	at := func(samples int) int {
		d := time.Duration(float64(samples) / audio.SampleRate * float64(time.Second))
		return u.Snapshot(audio.Live{Tag: 3, Position: d}).Playing
	}
	b1 := fake.FramesFor(sentences[0]) * uitest.FakeFrameSamples
	b2 := b1 + fake.FramesFor(sentences[1])*uitest.FakeFrameSamples
	for _, c := range []struct{ samples, want int }{
		{0, 0}, {b1 - 1, 0}, {b1, 1}, {b1 + 100, 1}, {b2 - 1, 1}, {b2, 2}, {b2 * 10, 2},
	} {
		if got := at(c.samples); got != c.want {
			t.Errorf("played %d samples (boundaries %d, %d): playing %d, want %d", c.samples, b1, b2, got, c.want)
		}
	}
	if got := u.Snapshot(audio.Live{Tag: 99, Position: time.Second}).Playing; got != 0 {
		t.Errorf("another Play's position moved this utterance to sentence %d", got)
	}
}

// Past MaxKeptAudio the utterance keeps no more audio; what it kept is
// whole sentences, and Text names just those. A stop also keeps Text to
// the sentences heard.
func TestKeptAudioStopsAtCap(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.01}
	sentences := []string{"First sentence.", "Second one here.", "Third sentence now.", "Fourth."}
	two := (fake.FramesFor(sentences[0]) + fake.FramesFor(sentences[1])) * uitest.FakeFrameSamples
	defer func(n int) { maxKeptSamples = n }(maxKeptSamples)
	maxKeptSamples = two + uitest.FakeFrameSamples // part of the third fits
	p := &sink{}
	u := NewSentences(2, strings.Join(sentences, " "), sentences, engine.Request{Voice: "ryan"}, fake, p, 0)
	end := runDone(t, u)
	if end.Err != nil || len(end.PCM) != two {
		t.Fatalf("err %v, kept %d samples, want the first two sentences' %d", end.Err, len(end.PCM), two)
	}
	if want := sentences[0] + " " + sentences[1]; u.Text() != want {
		t.Fatalf("text %q, want %q", u.Text(), want)
	}
	played := 0
	for _, c := range p.chunks {
		played += len(c.PCM)
	}
	if played <= two {
		t.Fatalf("the player got %d samples: the cap must not cut playback", played)
	}
}

// A stop during the second of four sentences keeps the text of the first
// two: what the kept audio holds.
func TestStoppedTextIsWhatWasSpoken(t *testing.T) {
	fake := &uitest.FakeEngine{RTF: 0.05} // 4 ms a frame: over a second for the second sentence
	sentences := []string{"First sentence.", "Second one" + strings.Repeat(", long enough to stop inside", 10) + ".", "Third.", "Fourth."}
	p := &sink{}
	u := NewSentences(4, strings.Join(sentences, "\n"), sentences, engine.Request{Voice: "ryan"}, fake, p, 0)
	go u.Run(nil)
	first := fake.FramesFor(sentences[0])
	deadline := time.Now().Add(10 * time.Second)
	for u.Snapshot(audio.Live{}).Frames < int64(first+3) {
		if time.Now().After(deadline) {
			t.Fatal("the second sentence never started")
		}
		time.Sleep(time.Millisecond)
	}
	u.Cancel()
	<-u.Done()
	end := u.Outcome()
	if !end.Stopped || u.Text() != sentences[0]+" "+sentences[1] {
		t.Fatalf("stopped %v, text %q; want the first two sentences", end.Stopped, u.Text())
	}
	whole := NewSentences(5, strings.Join(sentences, "\n"), sentences, engine.Request{Voice: "ryan"}, fake, &sink{}, 0)
	if runDone(t, whole); whole.Text() != strings.Join(sentences, "\n") {
		t.Fatalf("a finished utterance's text %q is not the text as given", whole.Text())
	}
}
