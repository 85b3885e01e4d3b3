package stream

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// BenchmarkJoinStreamsRatio runs, alternately in the same run on the same
// records (windowBenchSetup: ~200-byte JSON records over 100k keys, in event
// time order), the hand loop, the tumbling 10 s windowed count and a
// stream-stream self-join of the input within ±1 s (each record joins
// itself: one result per record; both sides buffered, scanned and closed),
// and reports join/hand and join/tumbling in events per CPU-second of the
// whole process (broker included). JOIN_BENCH_N records (default 200k),
// JOIN_BENCH_ROUNDS rounds (default 1); medians over rounds.
func BenchmarkJoinStreamsRatio(b *testing.B) {
	n, rounds := 200_000, 1
	if s := os.Getenv("JOIN_BENCH_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if s := os.Getenv("JOIN_BENCH_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
	}
	tumbling := Tumbling(10 * time.Second)
	join := func(bl *Builder) {
		in := From(bl, "in", String(), JSON[benchEvent]())
		JoinStreams(in, in, JoinWindows{Before: time.Second, After: time.Second}, JoinStore{Name: "j", Late: DropLate()},
			func(_ string, l, r benchEvent) (int64, error) { return l.N + r.N, nil },
			JoinCodecs(String(), JSON[benchEvent](), JSON[benchEvent]())).To("out", String(), Int64())
	}
	for range b.N {
		var rh, rt []float64
		for range rounds {
			h := runHandLoopN(b, n)
			tu := runWindowApp(b, n, windowBenchResults(n, tumbling.w), buildWindowedCount(tumbling))
			j := runWindowApp(b, n, int64(n)+3, join) // + the 3 sentinels, joined with themselves
			rh = append(rh, j.perCPUSec()/h.perCPUSec())
			rt = append(rt, j.perCPUSec()/tu.perCPUSec())
			b.Logf("round: hand %.0f tumbling %.0f join %.0f events/cpu-s; join/hand %.3f join/tumbling %.3f",
				h.perCPUSec(), tu.perCPUSec(), j.perCPUSec(), j.perCPUSec()/h.perCPUSec(), j.perCPUSec()/tu.perCPUSec())
		}
		b.ReportMetric(median(rh), "join/hand-cpu")
		b.ReportMetric(median(rt), "join/tumbling-cpu")
	}
}
