//go:build !noopus

package audioenc

/*
#cgo pkg-config: opus ogg opusfile
#include <stdlib.h>
#include <opus/opus.h>
#include <ogg/ogg.h>
#include <opusfile.h>

// The encoder ctls are variadic macros, which cgo cannot call directly.
static OpusEncoder *tb_opus_new(int rate, int bitrate, int *lookahead, int *err) {
	OpusEncoder *e = opus_encoder_create(rate, 1, OPUS_APPLICATION_AUDIO, err);
	if (e == NULL) {
		return NULL;
	}
	opus_int32 la = 0;
	if ((*err = opus_encoder_ctl(e, OPUS_SET_BITRATE(bitrate))) != OPUS_OK ||
	    (*err = opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(&la))) != OPUS_OK) {
		opus_encoder_destroy(e);
		return NULL;
	}
	*lookahead = la;
	return e;
}

static ogg_stream_state *tb_ogg_new(int serial) {
	ogg_stream_state *os = malloc(sizeof *os);
	if (os != NULL && ogg_stream_init(os, serial) != 0) {
		free(os);
		return NULL;
	}
	return os;
}

static void tb_ogg_free(ogg_stream_state *os) {
	ogg_stream_clear(os);
	free(os);
}

// tb_ogg_packet queues one packet (libogg copies the bytes).
static int tb_ogg_packet(ogg_stream_state *os, unsigned char *data, long n, int bos, int eos, long long granule, long long packetno) {
	ogg_packet op;
	op.packet = data;
	op.bytes = n;
	op.b_o_s = bos;
	op.e_o_s = eos;
	op.granulepos = granule;
	op.packetno = packetno;
	return ogg_stream_packetin(os, &op);
}

// tb_ogg_flush returns the next page of everything queued, or 0 when none.
static int tb_ogg_flush(ogg_stream_state *os, unsigned char **h, long *hl, unsigned char **b, long *bl) {
	ogg_page og;
	if (ogg_stream_flush(os, &og) == 0) {
		return 0;
	}
	*h = og.header;
	*hl = og.header_len;
	*b = og.body;
	*bl = og.body_len;
	return 1;
}

// tb_op_decode decodes a whole Ogg Opus stream in memory (always 48 kHz,
// the decoder's rate) into a malloc'd buffer the caller frees.
static float *tb_op_decode(const unsigned char *data, size_t len, int *n, int *channels, int *input_rate, int *err) {
	*n = 0;
	OggOpusFile *of = op_open_memory(data, len, err);
	if (of == NULL) {
		return NULL;
	}
	const OpusHead *h = op_head(of, -1);
	*channels = h->channel_count;
	*input_rate = (int)h->input_sample_rate;
	int cap = 48000 * (*channels), total = 0;
	float *buf = malloc(sizeof(float) * cap);
	*err = 0;
	while (buf != NULL) {
		if (cap - total < 5760 * (*channels)) {
			float *nb = realloc(buf, sizeof(float) * cap * 2);
			if (nb == NULL) {
				*err = OP_EFAULT;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		int got = op_read_float(of, buf + total, cap - total, NULL);
		if (got <= 0) {
			*err = got;
			break;
		}
		total += got * (*channels);
	}
	op_free(of);
	*n = total;
	return buf;
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"unsafe"
)

const (
	// opusBitrate: 48 kb/s mono is transparent for speech, a tenth of 16-bit
	// PCM at 24 kHz.
	opusBitrate = 48000
	// opusFrameMs is the packet length; 20 ms is Opus's usual choice.
	opusFrameMs = 20
	// opusGranuleRate: Ogg Opus counts granule positions and pre-skip in
	// 48 kHz samples whatever the coding rate (RFC 7845, section 4).
	opusGranuleRate = 48000
	opusMaxPacket   = 4000 // bytes; the size libopus documents as always enough
)

// opusEncoder encodes with libopus at the caller's rate (Opus codes 8, 12,
// 16, 24 and 48 kHz natively, so 24 kHz speech needs no resampling) and
// frames the packets into Ogg pages with libogg, Xiph's reference
// implementation of the container. The two header packets follow RFC 7845
// section 5: pre-skip is the encoder's lookahead, and the last page's
// granule position marks the exact end, so a decoder returns exactly the
// samples written. (libopusenc, which does all this in one library, is
// version 0.2.1 in Debian bookworm and fails an assertion in
// ope_encoder_drain when a stream holds no audio, a bug fixed upstream only
// later.) Every Write flushes a page, so audio streams out as it is made.
type opusEncoder struct {
	enc       *C.OpusEncoder
	os        *C.ogg_stream_state
	w         io.Writer
	rate      int
	frame     int // samples per packet
	lookahead int // encoder delay in samples at rate
	pending   []float32
	written   int64 // input samples taken in
	coded     int64 // samples (at rate) covered by the packets so far
	packetNo  int64
	packet    []byte
	err       error
	closed    bool
}

func newOpus(w io.Writer, rate int) (Encoder, error) {
	switch rate {
	case 8000, 12000, 16000, 24000, 48000:
	default:
		return nil, fmt.Errorf("audioenc: opus codes 8, 12, 16, 24 or 48 kHz, not %d Hz", rate)
	}
	var la, cerr C.int
	enc := C.tb_opus_new(C.int(rate), opusBitrate, &la, &cerr)
	if enc == nil {
		return nil, fmt.Errorf("audioenc: opus: %s", C.GoString(C.opus_strerror(cerr)))
	}
	os := C.tb_ogg_new(C.int(rand.Int32()))
	if os == nil {
		C.opus_encoder_destroy(enc)
		return nil, fmt.Errorf("audioenc: opus: cannot start an Ogg stream")
	}
	e := &opusEncoder{enc: enc, os: os, w: w, rate: rate, frame: rate * opusFrameMs / 1000,
		lookahead: int(la), packet: make([]byte, opusMaxPacket)}
	// The identification header is alone on the first page and the comment
	// header ends its own page (RFC 7845 section 3), so each is flushed.
	for i, h := range [][]byte{e.opusHead(), opusTags()} {
		if e.queue(h, i == 0, false, 0) != nil || e.flush() != nil {
			break
		}
	}
	if e.err != nil {
		e.free()
		return nil, e.err
	}
	return e, nil
}

// opusHead is the identification header (RFC 7845 section 5.1), mono,
// mapping family 0.
func (e *opusEncoder) opusHead() []byte {
	h := append([]byte("OpusHead"), 1, 1) // version 1, one channel
	h = binary.LittleEndian.AppendUint16(h, uint16(e.preSkip()))
	h = binary.LittleEndian.AppendUint32(h, uint32(e.rate))
	h = binary.LittleEndian.AppendUint16(h, 0) // output gain
	return append(h, 0)                        // channel mapping family
}

// opusTags is the comment header (RFC 7845 section 5.2): the libopus version
// as vendor and no user comments.
func opusTags() []byte {
	vendor := C.GoString(C.opus_get_version_string())
	h := append([]byte("OpusTags"), binary.LittleEndian.AppendUint32(nil, uint32(len(vendor)))...)
	h = append(h, vendor...)
	return binary.LittleEndian.AppendUint32(h, 0)
}

func (e *opusEncoder) preSkip() int64 { return int64(e.lookahead) * opusGranuleRate / int64(e.rate) }

// queue hands one packet to libogg (which copies it); flush writes it out.
func (e *opusEncoder) queue(p []byte, bos, eos bool, granule int64) error {
	if e.err != nil {
		return e.err
	}
	var data *C.uchar
	if len(p) > 0 {
		data = (*C.uchar)(unsafe.Pointer(&p[0]))
	}
	if C.tb_ogg_packet(e.os, data, C.long(len(p)), cbool(bos), cbool(eos), C.longlong(granule), C.longlong(e.packetNo)) != 0 {
		e.err = fmt.Errorf("audioenc: opus: Ogg packet refused")
		return e.err
	}
	e.packetNo++
	return nil
}

// flush writes every queued packet out as pages.
func (e *opusEncoder) flush() error {
	for {
		var h, b *C.uchar
		var hl, bl C.long
		if C.tb_ogg_flush(e.os, &h, &hl, &b, &bl) == 0 {
			return nil
		}
		page := append(C.GoBytes(unsafe.Pointer(h), C.int(hl)), C.GoBytes(unsafe.Pointer(b), C.int(bl))...)
		if _, err := e.w.Write(page); err != nil {
			e.err = fmt.Errorf("audioenc: opus: %w", err)
			return e.err
		}
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// encodeFrame codes one frame of pending samples (padding with silence) and
// queues the packet; eos ends the stream at the written samples.
func (e *opusEncoder) encodeFrame(eos bool) error {
	in := make([]float32, e.frame)
	n := copy(in, e.pending)
	e.pending = e.pending[n:]
	for i, x := range in {
		if x != x { // NaN: silence, as the other formats do
			in[i] = 0
		}
	}
	got := C.opus_encode_float(e.enc, (*C.float)(unsafe.Pointer(&in[0])), C.int(e.frame),
		(*C.uchar)(unsafe.Pointer(&e.packet[0])), C.opus_int32(len(e.packet)))
	if got < 0 {
		e.err = fmt.Errorf("audioenc: opus: %s", C.GoString(C.opus_strerror(got)))
		return e.err
	}
	e.coded += int64(e.frame)
	// A page's granule position counts the 48 kHz samples decoded through
	// its last packet, pre-skip included; the last one counts only the
	// samples written, and the decoder drops the padding past it.
	granule := e.coded * opusGranuleRate / int64(e.rate)
	if eos {
		granule = e.preSkip() + e.written*opusGranuleRate/int64(e.rate)
	}
	return e.queue(e.packet[:got], false, eos, granule)
}

func (e *opusEncoder) Write(pcm []float32) error {
	if e.closed {
		return ErrClosed
	}
	if e.err != nil {
		return e.err
	}
	e.pending = append(e.pending, pcm...)
	e.written += int64(len(pcm))
	for len(e.pending) >= e.frame {
		if err := e.encodeFrame(false); err != nil {
			return err
		}
	}
	return e.flush()
}

// Close codes the rest plus enough silence to push the encoder's lookahead
// out, marks the last packet end-of-stream, and frees the codec.
func (e *opusEncoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	defer e.free()
	if e.err != nil {
		return e.err
	}
	// The decoder needs lookahead samples past the last one written.
	need := e.written + int64(e.lookahead) - e.coded
	frames := max(1, int((need+int64(e.frame)-1)/int64(e.frame)))
	for i := 1; i <= frames; i++ {
		if err := e.encodeFrame(i == frames); err != nil {
			return err
		}
	}
	return e.flush()
}

func (e *opusEncoder) free() {
	if e.enc != nil {
		C.opus_encoder_destroy(e.enc)
		e.enc = nil
	}
	if e.os != nil {
		C.tb_ogg_free(e.os)
		e.os = nil
	}
}

// decodeOpus reads a whole Ogg Opus stream with libopusfile, Xiph's reference
// reader (it applies the pre-skip and the end granule). Opus always decodes
// at 48 kHz; the rate the encoder was given is in the header.
func decodeOpus(b []byte) (Decoded, error) {
	if len(b) == 0 {
		return Decoded{}, fmt.Errorf("audioenc: opus: empty stream")
	}
	var n, ch, inRate, cerr C.int
	buf := C.tb_op_decode((*C.uchar)(unsafe.Pointer(&b[0])), C.size_t(len(b)), &n, &ch, &inRate, &cerr)
	if buf != nil {
		defer C.free(unsafe.Pointer(buf))
	}
	if cerr != 0 || buf == nil {
		return Decoded{}, fmt.Errorf("audioenc: opus: cannot decode (libopusfile error %d)", int(cerr))
	}
	if ch != 1 {
		return Decoded{}, fmt.Errorf("audioenc: opus: %d channels, want mono", int(ch))
	}
	pcm := make([]float32, int(n))
	copy(pcm, unsafe.Slice((*float32)(unsafe.Pointer(buf)), int(n)))
	return Decoded{PCM: pcm, SampleRate: opusGranuleRate, SourceRate: int(inRate)}, nil
}
