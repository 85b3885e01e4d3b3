package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// registryAddrOf is the address from serve's "schema registry listening"
// log line.
func (p *serveProc) registryAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.lines {
		if m["msg"] == "schema registry listening" {
			a, _ := m["addr"].(string)
			return a
		}
	}
	p.t.Fatalf("no schema registry log line\n%s", p.raw.String())
	return ""
}

// TestServeSchemaRegistry: weir serve serves the registry beside its broker,
// and what it answered survives a kill -9 of the process.
func TestServeSchemaRegistry(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	p := startServe(t, nil, "--data-dir", data, "--registry-addr", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs("http://" + p.registryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	const v1 = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	s, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: v1})
	if err != nil || s.ID != 1 {
		t.Fatalf("register: %+v %v", s, err)
	}
	if res := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFullTransitive}, "orders-value"); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no clean shutdown
		t.Fatal(err)
	}
	<-p.exited

	p2 := startServe(t, nil, "--data-dir", data, "--registry-addr", "127.0.0.1:0")
	cl2, err := sr.NewClient(sr.URLs("http://" + p2.registryAddr()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl2.SchemaByVersion(ctx, "orders-value", 1)
	if err != nil || got.ID != 1 || got.Schema.Schema != v1 {
		t.Fatalf("after kill -9: %+v %v", got, err)
	}
	if res := cl2.Compatibility(ctx, "orders-value"); res[0].Err != nil || res[0].Level != sr.CompatFullTransitive {
		t.Fatalf("level after kill -9: %+v", res[0])
	}
}

// TestServeRegistryOff: --registry-addr off serves no registry.
func TestServeRegistryOff(t *testing.T) {
	p := startServe(t, nil, "--data-dir", t.TempDir(), "--registry-addr", "off")
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.lines {
		if m["msg"] == "schema registry listening" {
			t.Fatalf("registry started with --registry-addr off: %v", m)
		}
	}
}

// TestRegistryCommand: weir registry serves the registry for a cluster it
// did not start, until its context ends.
func TestRegistryCommand(t *testing.T) {
	addr := startTestBroker(t)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cf := &clientFlags{brokers: []string{addr}, timeout: 30 * time.Second}
		done <- runRegistry(ctx, "127.0.0.1:0", cf, &registryHTTPFlags{}, "_schemas", slog.New(slog.DiscardHandler), pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	url := strings.Fields(strings.TrimPrefix(line, "weir registry: serving "))[0]
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	if s, err := cl.CreateSchema(rctx, "x", sr.Schema{Schema: `"string"`}); err != nil || s.ID != 1 {
		t.Fatalf("register through weir registry: %+v %v", s, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("weir registry stopped with %v", err)
	}
}
