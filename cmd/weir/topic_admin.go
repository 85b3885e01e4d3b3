package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/weirhq/weir/broker"
)

// The cleaner's progress of a compacted partition is not carried by the
// Kafka protocol. weir's broker serves it on its read-only admin API
// (GET /v1/partitions/{topic} on the HTTP address, port 9644 by default,
// like Redpanda's admin API); describe asks it when it answers and the
// topic ID it reports matches the one the Kafka protocol gave (so a
// different broker on that address is never taken for this one). Otherwise
// the progress is stated as unknown, with the reason.

// defaultAdminPort is weir serve's default --http-addr port.
const defaultAdminPort = "9644"

// adminSource answers the admin API of one broker address ("" when off).
type adminSource struct {
	addr    string // host:port, "" = not asked
	timeout time.Duration
	client  *http.Client
}

// newAdminSource resolves --admin-addr: "off" disables it, "" derives it
// from the first bootstrap broker's host and port 9644.
func newAdminSource(flag string, brokers []string, timeout time.Duration) adminSource {
	addr := flag
	switch {
	case flag == "off":
		addr = ""
	case flag == "" && len(brokers) > 0:
		host, _, err := net.SplitHostPort(brokers[0])
		if err != nil {
			host = brokers[0]
		}
		addr = net.JoinHostPort(host, defaultAdminPort)
	}
	t := min(timeout, 5*time.Second)
	return adminSource{addr: addr, timeout: t, client: &http.Client{Timeout: t}}
}

// partitions fetches the topic's partitions from the admin API and checks
// that they belong to the topic with id (as reported by Metadata).
func (a adminSource) partitions(ctx context.Context, topic, id string) (map[int32]broker.AdminPartition, error) {
	if a.addr == "" {
		return nil, errors.New("admin API not asked (--admin-addr off)")
	}
	u := "http://" + a.addr + "/v1/partitions/" + url.PathEscape(topic)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no weir admin API at %s", a.addr)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil, fmt.Errorf("admin API at %s answered %s", a.addr, resp.Status)
	}
	out, err := decodeAdminTopic(io.LimitReader(resp.Body, maxAdminAnswer), topic, id)
	if err != nil {
		return nil, fmt.Errorf("admin API at %s: %w", a.addr, err)
	}
	return out, nil
}

// maxAdminAnswer bounds the body read from the admin API (a partition is
// ~400 bytes of JSON).
const maxAdminAnswer = 64 << 20

// decodeAdminTopic decodes GET /v1/partitions/{topic}'s body and checks it
// describes topic with id: partitions by number, each once, none negative.
func decodeAdminTopic(r io.Reader, topic, id string) (map[int32]broker.AdminPartition, error) {
	var at broker.AdminTopic
	if err := json.NewDecoder(r).Decode(&at); err != nil {
		return nil, err
	}
	if at.Topic == "" || at.TopicID == "" {
		return nil, errors.New("answered without weir's partition status (not a weir broker?)")
	}
	if at.Topic != topic || at.TopicID != id {
		return nil, fmt.Errorf("serves another topic %q (id %s, want %s)", at.Topic, at.TopicID, id)
	}
	out := make(map[int32]broker.AdminPartition, len(at.Partitions))
	for _, p := range at.Partitions {
		if _, dup := out[p.Partition]; dup || p.Partition < 0 {
			return nil, fmt.Errorf("partition %d listed twice or negative", p.Partition)
		}
		out[p.Partition] = p
	}
	return out, nil
}

// partitionCleaner is the cleaner state of one compacted partition in
// describe's output.
type partitionCleaner struct {
	// CleanedUpTo is the cleaner checkpoint: only the latest value per key
	// before it, the full history from it. -1: never cleaned.
	CleanedUpTo   int64   `json:"cleaned_up_to"`
	DirtyRatio    float64 `json:"dirty_ratio"`
	LastCleanTime string  `json:"last_clean_time,omitempty"`
	LastCleanMs   int64   `json:"last_clean_ms"`
	Cleaning      bool    `json:"cleaning"`
	Source        string  `json:"source"` // the admin API address asked
}

func cleanerOf(p broker.AdminPartition, addr string) *partitionCleaner {
	return &partitionCleaner{CleanedUpTo: p.CleanedUpTo, DirtyRatio: p.DirtyRatio, LastCleanTime: p.LastCleanTime,
		LastCleanMs: p.LastCleanMs, Cleaning: p.Cleaning, Source: addr}
}
