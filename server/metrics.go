package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plaudit/plaudit/persist"
)

// metricsHandler serves the server's metrics in Prometheus text format,
// from a registry of its own (no global state). Gauges are read when
// scraped.
func metricsHandler(storage func() persist.Condition) http.Handler {
	reg := prometheus.NewRegistry()
	gauge := func(name, help string, value func(persist.Condition) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return value(storage()) }))
	}
	gauge("plaudit_storage_full", "1 while writes are refused because the disk is (nearly) full.",
		func(c persist.Condition) float64 { return boolGauge(c.Full) })
	gauge("plaudit_storage_failed", "1 once the store has fenced writes until a restart.",
		func(c persist.Condition) float64 { return boolGauge(c.Failed != nil) })
	gauge("plaudit_storage_free_bytes", "Free space of the data directory's disk, as last measured.",
		func(c persist.Condition) float64 { return float64(c.FreeBytes) })
	gauge("plaudit_storage_min_free_bytes", "Free space below which writes are refused.",
		func(c persist.Condition) float64 { return float64(c.MinFreeBytes) })
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
