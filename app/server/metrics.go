package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus series, on a registry of its own so
// two servers in one process (tests) do not collide.
type metrics struct {
	reg      *prometheus.Registry
	ttfc     prometheus.Histogram
	rtf      prometheus.Histogram
	audio    prometheus.Counter
	active   prometheus.Gauge
	queued   prometheus.Gauge
	rejected *prometheus.CounterVec
	requests *prometheus.CounterVec
}

func newMetrics(device, model string) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ttfc: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "talkbox_ttfc_seconds",
			Help:    "Time from request accepted to the first audio chunk sent.",
			Buckets: []float64{.01, .02, .05, .1, .2, .35, .5, .75, 1, 2, 5, 10, 30},
		}),
		rtf: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "talkbox_rtf",
			Help:    "Real-time factor of finished utterances (synthesis wall time / audio duration).",
			Buckets: []float64{.05, .1, .2, .3, .5, .75, 1, 1.5, 2, 5, 10},
		}),
		audio: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "talkbox_audio_seconds_total", Help: "Seconds of audio sent.",
		}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talkbox_active_streams", Help: "Utterances admitted and running.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "talkbox_queue_depth", Help: "Requests waiting for a slot.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talkbox_rejected_requests_total", Help: "Requests refused, by reason.",
		}, []string{"reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "talkbox_speech_requests_total", Help: "Speech requests by response format and outcome.",
		}, []string{"format", "outcome"}),
	}
	device_ := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "talkbox_device_info", Help: "Where the model runs (value 1).",
		ConstLabels: prometheus.Labels{"device": device, "model": model},
	})
	device_.Set(1)
	m.reg.MustRegister(m.ttfc, m.rtf, m.audio, m.active, m.queued, m.rejected, m.requests, device_,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) setLoad(l Load) {
	m.active.Set(float64(l.Active))
	m.queued.Set(float64(l.Queued))
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
