package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/twmb/franz-go/pkg/kfake"
)

// serveCommand is the hidden subcommand that runs one broker in this process:
//
//	brokerbench serve weir|kfake|nats --dir DIR
//
// It speaks the control protocol of control.go on stdin/stdout and shuts
// the broker down cleanly when stdin reaches EOF or on SIGTERM.
const serveCommand = "serve"

// running is a broker started in this process.
type running struct {
	addr  string
	close func() error
}

func serveMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprintln(stderr, "usage: brokerbench serve weir|kfake|nats --dir DIR")
		return 2
	}
	target := args[0]
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "data directory (required)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "serve: --dir is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	r, err := startTarget(ctx, target, *dir, logger)
	if err != nil {
		fmt.Fprintf(stderr, "serve %s: %v\n", target, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s%s\n", listenPrefix, r.addr)

	eof := make(chan struct{})
	go func() {
		defer close(eof)
		serveControl(stdin, stdout)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	if err := r.close(); err != nil {
		fmt.Fprintf(stderr, "serve %s: close: %v\n", target, err)
		return 1
	}
	return 0
}

func startTarget(ctx context.Context, target, dir string, logger *slog.Logger) (*running, error) {
	switch target {
	case targetWeir:
		return startWeir(ctx, dir, logger)
	case targetWeirTLS:
		return startWeirTLS(ctx, dir, logger)
	case targetKfake:
		return startKfake(dir)
	case targetNATS:
		return startNATS(dir)
	}
	return nil, fmt.Errorf("unknown target %q", target)
}

// startKfake runs franz-go's kfake in durable mode: state persisted under
// dir and every produced batch fsynced before the response (SyncWrites).
func startKfake(dir string) (*running, error) {
	c, err := kfake.NewCluster(
		kfake.DataDir(dir),
		kfake.SyncWrites(),
		kfake.NumBrokers(1),
		kfake.Ports(0),
	)
	if err != nil {
		return nil, err
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return nil, fmt.Errorf("kfake: %d listen addresses", len(addrs))
	}
	return &running{addr: addrs[0], close: func() error { c.Close(); return nil }}, nil
}

// startNATS runs an in-process NATS server with JetStream on file storage
// with sync_always (every write synced before the publish is acked).
func startNATS(dir string) (*running, error) {
	s, err := server.NewServer(&server.Options{
		ServerName: "brokerbench",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoSigs:     true,
		NoLog:      true,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
	})
	if err != nil {
		return nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, errors.New("nats: not ready within 30s")
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		return nil, errors.New("nats: JetStream not enabled")
	}
	return &running{addr: s.ClientURL(), close: func() error {
		s.Shutdown()
		s.WaitForShutdown()
		return nil
	}}, nil
}
