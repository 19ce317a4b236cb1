package server

import (
	"context"
	"net/http"
	"strconv"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/jslog"
)

// metricsRegistry gathers the server's metrics in a registry of its own
// (no global state): the requests of both doors (the service's), the agent
// actors', the store's and Pebble's, the embedded NATS server's, the
// storage gauges, and the Go runtime's and the process's. Everything not
// counted as it happens is read when scraped.
func (s *Server) metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.service.Collector(), s.registry.Collector(), s.store.Collector(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.nats != nil {
		reg.MustRegister(natsCollector{s.nats})
	}
	if s.cluster != nil {
		reg.MustRegister(clusterCollector{s.cluster})
	}
	storage := s.store.Condition
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
	return reg
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// natsCollector reads the embedded nats-server's varz when scraped.
type natsCollector struct{ ns *natsserver.Server }

func natsDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("plaudit_nats_"+name, help, nil, nil)
}

var (
	descNATSConns    = natsDesc("connections", "Client connections open to the embedded NATS server.")
	descNATSConnsAll = natsDesc("connections_total", "Client connections the embedded NATS server has accepted.")
	descNATSSubs     = natsDesc("subscriptions", "Subscriptions on the embedded NATS server.")
	descNATSInMsgs   = natsDesc("in_msgs_total", "Messages the embedded NATS server received.")
	descNATSOutMsgs  = natsDesc("out_msgs_total", "Messages the embedded NATS server sent.")
	descNATSInBytes  = natsDesc("in_bytes_total", "Bytes the embedded NATS server received.")
	descNATSOutBytes = natsDesc("out_bytes_total", "Bytes the embedded NATS server sent.")
	descNATSSlow     = natsDesc("slow_consumers_total", "Clients the embedded NATS server disconnected as slow consumers.")
	descNATSStale    = natsDesc("stale_connections_total", "Connections the embedded NATS server found stale.")
	natsDescs        = []*prometheus.Desc{descNATSConns, descNATSConnsAll, descNATSSubs, descNATSInMsgs, descNATSOutMsgs, descNATSInBytes, descNATSOutBytes, descNATSSlow, descNATSStale}
)

func (c natsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range natsDescs {
		ch <- d
	}
}

func (c natsCollector) Collect(ch chan<- prometheus.Metric) {
	v, err := c.ns.Varz(nil)
	if err != nil {
		return
	}
	counter := func(d *prometheus.Desc, x float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, x)
	}
	gauge := func(d *prometheus.Desc, x float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x)
	}
	gauge(descNATSConns, float64(v.Connections))
	counter(descNATSConnsAll, float64(v.TotalConnections))
	gauge(descNATSSubs, float64(v.Subscriptions))
	counter(descNATSInMsgs, float64(v.InMsgs))
	counter(descNATSOutMsgs, float64(v.OutMsgs))
	counter(descNATSInBytes, float64(v.InBytes))
	counter(descNATSOutBytes, float64(v.OutBytes))
	counter(descNATSSlow, float64(v.SlowConsumers))
	counter(descNATSStale, float64(v.StaleConnections))
}

// clusterCollector reads a cluster node's leases when scraped: which
// partitions it owns and at what epoch, the live nodes, the directory's lag.
type clusterCollector struct{ c *clusterNode }

var (
	descPartitionOwned = prometheus.NewDesc("plaudit_cluster_partition_owned",
		"1 for each partition this node owns now, 0 for the others.", []string{"partition"}, nil)
	descPartitionEpoch = prometheus.NewDesc("plaudit_cluster_partition_epoch",
		"The epoch (lease revision) at which this node took each partition it owns.", []string{"partition"}, nil)
	descClusterNodes = prometheus.NewDesc("plaudit_cluster_nodes",
		"Live nodes of the cluster, as this node sees them.", nil, nil)
	descDirectoryLag = prometheus.NewDesc("plaudit_cluster_directory_lag",
		"Directory writes of the cluster this node has not applied yet.", nil, nil)
	descLogMessages = prometheus.NewDesc("plaudit_cluster_partition_log_messages",
		"Messages in the log of each partition this node owns.", []string{"partition"}, nil)
	descLogBytes = prometheus.NewDesc("plaudit_cluster_partition_log_bytes",
		"Bytes in the log of each partition this node owns.", []string{"partition"}, nil)
	descLogLag = prometheus.NewDesc("plaudit_cluster_partition_log_replica_lag",
		"Operations the furthest-behind copy of each owned partition's log lags its leader.", []string{"partition"}, nil)
)

func (cc clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitionOwned, descPartitionEpoch, descClusterNodes, descDirectoryLag,
		descLogMessages, descLogBytes, descLogLag} {
		ch <- d
	}
}

func (cc clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c := cc.c
	if c.leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), logStateTime)
	defer cancel()
	for p := range c.meta.Partitions {
		label := strconv.Itoa(p)
		epoch, ok := c.leases.Owns(p)
		ch <- prometheus.MustNewConstMetric(descPartitionOwned, prometheus.GaugeValue, boolGauge(ok), label)
		if ok {
			ch <- prometheus.MustNewConstMetric(descPartitionEpoch, prometheus.GaugeValue, float64(epoch), label)
			if l := c.streamState(ctx, jslog.StreamName(p)); l.Leader != "" {
				var lag uint64
				for _, r := range l.Replicas {
					lag = max(lag, r.Lag)
				}
				ch <- prometheus.MustNewConstMetric(descLogMessages, prometheus.GaugeValue, float64(l.Messages), label)
				ch <- prometheus.MustNewConstMetric(descLogBytes, prometheus.GaugeValue, float64(l.Bytes), label)
				ch <- prometheus.MustNewConstMetric(descLogLag, prometheus.GaugeValue, float64(lag), label)
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(descClusterNodes, prometheus.GaugeValue, float64(len(c.leases.Members())))
	if lag, err := c.dir.Lag(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(descDirectoryLag, prometheus.GaugeValue, float64(lag))
	}
}
