package pebblelog

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// commitKind names what a synced commit writes, for the metrics.
type commitKind int

const (
	commitAppend    commitKind = iota // an agent's events (Append)
	commitSnapshot                    // a snapshot and the trim of the log it covers
	commitDirectory                   // directory entries (Put, DeleteRange, and their unsynced forms) and recovery's repairs
	numCommitKinds
)

var commitKindNames = [numCommitKinds]string{"append", "snapshot", "directory"}

// metrics are the store's instruments: its own synced commits, counted as
// they happen (an array indexed by kind, two atomic adds and a histogram
// observation each), and Pebble's own metrics, read from DB.Metrics() when
// scraped.
type metrics struct {
	commits, bytes [numCommitKinds]prometheus.Counter
	commitVec      *prometheus.CounterVec
	bytesVec       *prometheus.CounterVec
	latency        prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		commitVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "plaudit_wal_commits_total",
			Help: "Commits to the store, by kind (append: the events of the agents whose appends waited for the same commit); all synced but a cluster node's mirror of the directory's (directory)."}, []string{"kind"}),
		bytesVec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "plaudit_wal_commit_bytes_total",
			Help: "Bytes of the synced commits' batches, by kind."}, []string{"kind"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "plaudit_wal_commit_duration_seconds",
			Help:    "Time a synced commit takes, its wait for a shared fsync (group commit) included.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512, 1, 2}}),
	}
	for k, name := range commitKindNames {
		m.commits[k] = m.commitVec.WithLabelValues(name)
		m.bytes[k] = m.bytesVec.WithLabelValues(name)
	}
	return m
}

// observe counts a commit, and times it if it was synced (the histogram
// is the synced commits': an unsynced one takes microseconds).
func (m *metrics) observe(kind commitKind, bytes int, took time.Duration, synced bool) {
	m.commits[kind].Inc()
	m.bytes[kind].Add(float64(bytes))
	if synced {
		m.latency.Observe(took.Seconds())
	}
}

// Collector returns the store's metrics: its synced commits by kind, their
// bytes and latency, and Pebble's own (WAL fsyncs and their latency, WAL
// bytes, flushes, compactions, memtables, disk usage, block cache), read
// from DB.Metrics() on each scrape.
func (s *Store) Collector() prometheus.Collector { return storeCollector{s} }

type storeCollector struct{ s *Store }

func pebbleDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("plaudit_pebble_"+name, help, nil, nil)
}

var (
	descFsyncs          = pebbleDesc("wal_fsyncs_total", "WAL fsyncs: each makes every commit waiting for it durable (group commit).")
	descFsyncLatency    = pebbleDesc("wal_fsync_duration_seconds", "Latency of Pebble's WAL fsyncs.")
	descWALBytesIn      = pebbleDesc("wal_bytes_in_total", "Logical bytes written to the WAL.")
	descWALBytesWritten = pebbleDesc("wal_bytes_written_total", "Physical bytes written to the WAL, framing included.")
	descWALFiles        = pebbleDesc("wal_files", "Live WAL files.")
	descWALSize         = pebbleDesc("wal_size_bytes", "Live data in WAL files.")
	descFlushes         = pebbleDesc("flushes_total", "Memtable flushes.")
	descCompactions     = pebbleDesc("compactions_total", "Compactions.")
	descCompactDebt     = pebbleDesc("compaction_debt_bytes", "Estimated bytes to compact for the LSM to reach a stable state.")
	descMemtableSize    = pebbleDesc("memtable_size_bytes", "Bytes allocated by memtables and large batches.")
	descDiskUsage       = pebbleDesc("disk_usage_bytes", "Disk space used by the store: tables, WAL, manifests and the rest.")
	descL0Files         = pebbleDesc("l0_files", "Tables in level 0: many means compactions are behind.")
	descReadAmp         = pebbleDesc("read_amplification", "Sublevels and levels a read may have to visit.")
	descCacheHits       = pebbleDesc("block_cache_hits_total", "Block cache hits.")
	descCacheMisses     = pebbleDesc("block_cache_misses_total", "Block cache misses.")
	descCacheSize       = pebbleDesc("block_cache_size_bytes", "Bytes in the block cache.")

	descFilterAbsent = prometheus.NewDesc("plaudit_store_key_filter_absent_total",
		"Gets of a filtered key (Idempotency-Key records, judged answers) answered by the in-memory key filter without reading Pebble.", nil, nil)
	descFilterKeys = prometheus.NewDesc("plaudit_store_key_filter_keys",
		"Keys the in-memory key filter holds, deleted ones included until it is rebuilt.", nil, nil)
	descFilterBytes = prometheus.NewDesc("plaudit_store_key_filter_bytes", "Memory of the in-memory key filter.", nil, nil)
)

// fsyncBounds are the bucket bounds, in seconds, kept of Pebble's fsync
// histogram, which has a hundred buckets for Pebble's own tuning: each is
// replaced by the largest of Pebble's bounds at or below it, so every count
// reported is exact (a bound reads 0.00986 rather than 0.01).
var fsyncBounds = []float64{.0001, .0002, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10}

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	c.s.metrics.commitVec.Describe(ch)
	c.s.metrics.bytesVec.Describe(ch)
	c.s.metrics.latency.Describe(ch)
	for _, d := range []*prometheus.Desc{descFsyncs, descFsyncLatency, descWALBytesIn, descWALBytesWritten,
		descWALFiles, descWALSize, descFlushes, descCompactions, descCompactDebt, descMemtableSize, descDiskUsage,
		descL0Files, descReadAmp, descCacheHits, descCacheMisses, descCacheSize} {
		ch <- d
	}
	if c.s.filter != nil {
		ch <- descFilterAbsent
		ch <- descFilterKeys
		ch <- descFilterBytes
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.metrics
	m.commitVec.Collect(ch)
	m.bytesVec.Collect(ch)
	m.latency.Collect(ch)
	if f := c.s.filter; f != nil {
		ch <- prometheus.MustNewConstMetric(descFilterAbsent, prometheus.CounterValue, float64(f.absent.Load()))
		var keys, bytes float64
		if a := f.active.Load(); a != nil {
			keys, bytes = float64(a.added.Load()), float64(8*len(a.words))
		}
		ch <- prometheus.MustNewConstMetric(descFilterKeys, prometheus.GaugeValue, keys)
		ch <- prometheus.MustNewConstMetric(descFilterBytes, prometheus.GaugeValue, bytes)
	}
	pm := c.s.pebbleMetrics()
	if pm == nil {
		return
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if h := fsyncHistogram(pm); h != nil {
		counter(descFsyncs, float64(h.GetSampleCount()))
		ch <- constFsyncHistogram(h)
	}
	counter(descWALBytesIn, float64(pm.WAL.BytesIn))
	counter(descWALBytesWritten, float64(pm.WAL.BytesWritten))
	gauge(descWALFiles, float64(pm.WAL.Files))
	gauge(descWALSize, float64(pm.WAL.Size))
	counter(descFlushes, float64(pm.Flush.Count))
	counter(descCompactions, float64(pm.Compact.Count))
	gauge(descCompactDebt, float64(pm.Compact.EstimatedDebt))
	gauge(descMemtableSize, float64(pm.MemTable.Size))
	gauge(descDiskUsage, float64(pm.DiskSpaceUsage()))
	gauge(descL0Files, float64(pm.Levels[0].TablesCount))
	gauge(descReadAmp, float64(pm.ReadAmp()))
	counter(descCacheHits, float64(pm.BlockCache.Hits))
	counter(descCacheMisses, float64(pm.BlockCache.Misses))
	gauge(descCacheSize, float64(pm.BlockCache.Size))
}

// pebbleMetrics reads Pebble's metrics; nil once the store is closed.
func (s *Store) pebbleMetrics() *pebble.Metrics {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil
	}
	return s.db.Metrics()
}

func fsyncHistogram(pm *pebble.Metrics) *dto.Histogram {
	if pm.LogWriter.FsyncLatency == nil {
		return nil
	}
	var out dto.Metric
	if err := pm.LogWriter.FsyncLatency.Write(&out); err != nil {
		return nil
	}
	return out.GetHistogram()
}

// constFsyncHistogram re-buckets Pebble's fsync histogram (nanoseconds)
// into fsyncBounds (seconds).
func constFsyncHistogram(h *dto.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(fsyncBounds))
	src := h.GetBucket()
	j := 0
	for _, bound := range fsyncBounds {
		for j+1 < len(src) && src[j+1].GetUpperBound()/1e9 <= bound {
			j++
		}
		if j < len(src) && src[j].GetUpperBound()/1e9 <= bound {
			buckets[src[j].GetUpperBound()/1e9] = src[j].GetCumulativeCount()
		}
	}
	return prometheus.MustNewConstHistogram(descFsyncLatency, h.GetSampleCount(), h.GetSampleSum()/1e9, buckets)
}
