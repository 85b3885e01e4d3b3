package stream

import (
	"log/slog"
	"os"
	"testing"
)

// testLogger logs to the test log when STREAM_TEST_LOG is set.
func testLogger(t *testing.T) Opt {
	if os.Getenv("STREAM_TEST_LOG") == "" {
		return Logger(slog.New(slog.DiscardHandler))
	}
	return Logger(slog.New(slog.NewTextHandler(tw{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

type tw struct{ t *testing.T }

func (w tw) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
