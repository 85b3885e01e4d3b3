package main

import (
	"context"
	"log/slog"

	"github.com/weirhq/weir/broker"
)

// startWeir runs weir's broker with its default sync policy (an acks=all
// produce is answered after its data is fsynced).
func startWeir(ctx context.Context, dir string, logger *slog.Logger) (*running, error) {
	b, err := broker.Start(ctx, broker.Config{
		DataDir:   dir,
		KafkaAddr: "127.0.0.1:0",
		Logger:    logger,
	})
	if err != nil {
		return nil, err
	}
	return &running{addr: b.Addr(), close: b.Close}, nil
}
