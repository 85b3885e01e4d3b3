package broker

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"

	"github.com/weirhq/weir/broker/authz"
)

// The broker's read-only admin HTTP API (like Redpanda's admin API on port
// 9644): weir-specific facts the Kafka protocol does not carry. weir serve
// mounts it on its --http-addr next to /metrics.
//
// Behavior:
//   - GET /v1/partitions/{topic}: 200 with an AdminTopic (every partition's
//     offsets, size and cleaner state, read from the log at the time of the
//     request); 404 with an AdminError for an unknown topic.
//   - Anything else under /v1/: 404 (405 for a method other than GET).
//   - With an authorizer, a topic needs DESCRIBE for the request's
//     principal (WithPrincipal; User:ANONYMOUS by default): 403 with
//     TOPIC_AUTHORIZATION_FAILED otherwise, whether the topic exists or not.
//
// The API is versioned by its path; fields may be added, never renamed.

// AdminTopic is the body of GET /v1/partitions/{topic}.
type AdminTopic struct {
	ClusterID string `json:"cluster_id"`
	Topic     string `json:"topic"`
	// TopicID is Kafka's topic UUID string (base64 URL encoding, no
	// padding): a client checks it against Metadata to be sure it asked the
	// broker that holds the topic.
	TopicID    string           `json:"topic_id"`
	Partitions []AdminPartition `json:"partitions"`
}

// AdminPartition is one partition's state.
type AdminPartition struct {
	Partition        int32 `json:"partition"`
	LogStartOffset   int64 `json:"log_start_offset"`
	HighWatermark    int64 `json:"high_watermark"`
	LastStableOffset int64 `json:"last_stable_offset"`
	LogEndOffset     int64 `json:"log_end_offset"`
	SizeBytes        int64 `json:"size_bytes"`
	Compacted        bool  `json:"compacted"`
	// CleanedUpTo is the cleaner checkpoint (first dirty offset): below it
	// only the latest value per key remains (tombstones younger than
	// delete.retention.ms too), from it on the full history. -1: never
	// cleaned (the full history is kept from the log start).
	CleanedUpTo int64 `json:"cleaned_up_to"`
	// DirtyRatio: dirty / (clean + dirty) bytes of the cleanable closed
	// segments (what min.cleanable.dirty.ratio is compared with).
	DirtyRatio float64 `json:"dirty_ratio"`
	// LastCleanTime is RFC 3339 UTC ("" if never cleaned); LastCleanMs the
	// same in ms (-1).
	LastCleanTime string `json:"last_clean_time,omitempty"`
	LastCleanMs   int64  `json:"last_clean_ms"`
	Cleaning      bool   `json:"cleaning"` // a cleaning pass was running
}

// AdminError is the body of an error answer.
type AdminError struct {
	Error string `json:"error"`
}

// AdminHandler returns the admin API's handler (paths under /v1/).
func (b *Broker) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/partitions/{topic}", b.serveAdminPartitions)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusNotFound
		if r.Method != http.MethodGet {
			code = http.StatusMethodNotAllowed
		}
		writeAdminJSON(w, code, AdminError{Error: http.StatusText(code)})
	})
	return mux
}

func (b *Broker) serveAdminPartitions(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	if !b.Authorized(r, authz.OpDescribe, authz.ResourceTopic, name) { // authz_http.go
		writeAdminJSON(w, http.StatusForbidden, AdminError{Error: "TOPIC_AUTHORIZATION_FAILED: not authorized to describe topic " + name})
		return
	}
	t, ok := b.topics.get(name)
	if !ok {
		writeAdminJSON(w, http.StatusNotFound, AdminError{Error: "unknown topic " + name})
		return
	}
	out := AdminTopic{ClusterID: b.clusterID, Topic: name, TopicID: base64.RawURLEncoding.EncodeToString(t.id[:]),
		Partitions: make([]AdminPartition, 0, len(t.parts))}
	for p, l := range t.parts {
		cs := l.CleanerStatus()
		ap := AdminPartition{
			Partition:        int32(p),
			LogStartOffset:   l.LogStartOffset(),
			HighWatermark:    l.HighWatermark(),
			LastStableOffset: l.LastStableOffset(),
			LogEndOffset:     l.LogEndOffset(),
			SizeBytes:        l.Size(),
			Compacted:        cs.Compacted,
			CleanedUpTo:      cs.CleanedTo,
			DirtyRatio:       cs.DirtyRatio,
			LastCleanMs:      -1,
			Cleaning:         cs.Cleaning,
		}
		if !cs.LastClean.IsZero() {
			ap.LastCleanMs = cs.LastClean.UnixMilli()
			ap.LastCleanTime = cs.LastClean.UTC().Format(time.RFC3339)
		}
		out.Partitions = append(out.Partitions, ap)
	}
	writeAdminJSON(w, http.StatusOK, out)
}

func writeAdminJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
