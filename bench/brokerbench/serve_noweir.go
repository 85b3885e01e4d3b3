//go:build !weir

package main

import (
	"context"
	"errors"
	"log/slog"
)

// weirBuiltIn reports whether this build includes weir's broker.
const weirBuiltIn = false

// startWeir is unavailable in this build: weir's broker package is only
// linked in with -tags weir until it is committed and compiles (the harness
// benchmarks the peers meanwhile). The weir target fails with this error.
func startWeir(context.Context, string, *slog.Logger) (*running, error) {
	return nil, errors.New("weir target not built in (build with -tags weir)")
}
