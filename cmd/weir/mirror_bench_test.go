package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weirhq/weir/mirror"
)

// procCPU is the user+system CPU time a process used so far, from
// /proc/<pid>/stat (clock ticks of 10ms).
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skip("no /proc: CPU per GB not measurable here") // only Linux reports it
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// serveChild starts `weir serve` as a child process and returns its pid and
// Kafka address.
func serveChild(b *testing.B) (int, string) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json",
		"--data-dir", b.TempDir())
	cmd.Env = append(os.Environ(), execMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "weir serving" {
				a, _ := m["kafka_addr"].(string)
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd.Process.Pid, a
	case <-time.After(30 * time.Second):
		b.Fatal("weir serve did not start")
	}
	return 0, ""
}

// BenchmarkMirrorSourceCPU measures the CPU the source broker (`weir
// serve`, a child process) spends per GB read by a plain read_committed
// consumer and per GB copied by a mirror (to an in-process kfake cluster),
// alternating, and reports both and their ratio. CPU is counted in 10ms
// clock ticks: run enough iterations (-benchtime 5x) for the sums to mean
// something; a shared machine makes it noisy.
func BenchmarkMirrorSourceCPU(b *testing.B) {
	const (
		records = 200_000
		size    = 1000
		parts   = 4
	)
	pid, addr := serveChild(b)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, nil, "cpu"); err != nil {
		b.Fatal(err)
	}
	val := make([]byte, size)
	for i := 0; i < records; i += 1000 {
		var recs []*kgo.Record
		for j := i; j < i+1000; j++ {
			recs = append(recs, &kgo.Record{Topic: "cpu", Partition: int32(j % parts), Value: val})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	gb := float64(records*size) / 1e9
	var consumerCPU, mirrorCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A plain consumer reads everything.
		start := procCPU(b, pid)
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("cpu"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < records; {
			n += c.PollFetches(ctx).NumRecords()
		}
		c.Close()
		consumerCPU += procCPU(b, pid) - start

		// A mirror copies everything.
		kf, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		m, err := mirror.New(mirror.Config{Source: []string{addr}, Target: kf.ListenAddrs(), Topics: []string{"cpu"},
			ID: fmt.Sprint("cpu", i), Registerer: reg, RescanInterval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		start = procCPU(b, pid)
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(mctx) }()
		for copied(reg) < records {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		mirrorCPU += procCPU(b, pid) - start
		kf.Close()
	}
	b.ReportMetric(consumerCPU.Seconds()*1000/(gb*float64(b.N)), "consumer-src-cpu-ms/GB")
	b.ReportMetric(mirrorCPU.Seconds()*1000/(gb*float64(b.N)), "mirror-src-cpu-ms/GB")
	b.ReportMetric(float64(mirrorCPU)/float64(consumerCPU), "mirror/consumer")
}

// copied sums weir_mirror_copied_records_total in reg.
func copied(reg *prometheus.Registry) int {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "weir_mirror_copied_records_total" {
			for _, mt := range mf.GetMetric() {
				total += mt.GetCounter().GetValue()
			}
		}
	}
	return int(total)
}
