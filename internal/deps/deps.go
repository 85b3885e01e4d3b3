//go:build deps

// Package deps pins the project's dependencies in go.mod before every package
// that uses them exists, so parallel work does not fight over go.mod.
// It is never built (see the build tag).
package deps

import (
	_ "github.com/IBM/sarama"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/segmentio/kafka-go"
	_ "github.com/spf13/cobra"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "go.opentelemetry.io/otel"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
)
