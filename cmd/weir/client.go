package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientFlags are the connection settings shared by every command that
// talks to a cluster (weir topic, produce, consume, ...). They work against
// weir or any Kafka-compatible cluster.
type clientFlags struct {
	brokers  []string
	clientID string
	timeout  time.Duration
	sec      *clientSecurity // client_security.go
}

// defaultBrokers is the --brokers default: WEIR_BROKERS when set, else the
// address weir serve listens on by default.
func defaultBrokers() []string {
	if v := os.Getenv("WEIR_BROKERS"); v != "" {
		return splitList(v)
	}
	return []string{"127.0.0.1:9092"}
}

// addClientFlags registers the connection flags as persistent flags of cmd
// (so "weir topic --brokers X create" and "weir topic create --brokers X"
// both work).
func addClientFlags(cmd *cobra.Command) *clientFlags {
	cf := &clientFlags{}
	pf := cmd.PersistentFlags()
	pf.StringSliceVarP(&cf.brokers, "brokers", "b", defaultBrokers(), "bootstrap brokers, comma separated (WEIR_BROKERS sets the default)")
	pf.StringVar(&cf.clientID, "client-id", "weir-cli", "Kafka client.id")
	pf.DurationVar(&cf.timeout, "timeout", 30*time.Second, "deadline for each request round (admin requests, produce acknowledgements)")
	cf.sec = addClientSecurityFlags(pf)
	return cf
}

func (cf *clientFlags) opts(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(cf.brokers...),
		kgo.ClientID(cf.clientID),
		// A CLI should fail fast on a wrong address instead of retrying
		// for the client default (forever for produce).
		kgo.RetryTimeout(cf.timeout),
		kgo.RequestTimeoutOverhead(cf.timeout),
	}
	return append(o, extra...)
}

func (cf *clientFlags) client(extra ...kgo.Opt) (*kgo.Client, error) {
	if len(cf.brokers) == 0 {
		return nil, fmt.Errorf("--brokers is empty")
	}
	opts := cf.opts(extra...)
	if cf.sec != nil {
		sec, err := cf.sec.kgoOpts()
		if err != nil {
			return nil, err
		}
		opts = append(opts, sec...)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	return cl, nil
}

// reachable checks, within --timeout, that one of the brokers answers, so
// that a wrong or dead address fails with "broker unreachable: <address>"
// instead of a client retrying in the background forever (franz-go buffers
// produced records and rejoins groups until told otherwise).
func (cf *clientFlags) reachable(ctx context.Context, cl *kgo.Client) error {
	pctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	err := cl.Ping(pctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case pctx.Err() != nil:
		return fmt.Errorf("broker unreachable: %s (no answer within --timeout %s)", strings.Join(cf.brokers, ","), cf.timeout)
	default:
		return fmt.Errorf("broker unreachable: %s (%w)", strings.Join(cf.brokers, ","), err)
	}
}

// connect is client followed by reachable.
func (cf *clientFlags) connect(ctx context.Context, extra ...kgo.Opt) (*kgo.Client, error) {
	cl, err := cf.client(extra...)
	if err != nil {
		return nil, err
	}
	if err := cf.reachable(ctx, cl); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// admin is a connected (reachable) admin client whose requests carry
// --timeout as their broker-side timeout.
func (cf *clientFlags) admin(ctx context.Context) (*kadm.Client, func(), error) {
	cl, adm, err := cf.clientAdmin(ctx)
	if err != nil {
		return nil, nil, err
	}
	return adm, cl.Close, nil
}

// clientAdmin is admin with its client, for commands that also fetch
// records (replay reach reads each partition's first batch).
func (cf *clientFlags) clientAdmin(ctx context.Context) (*kgo.Client, *kadm.Client, error) {
	cl, err := cf.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(cf.timeout / time.Millisecond))
	return cl, adm, nil
}

// adminCtx is admin plus the per-command deadline (--timeout) derived
// from parent; done closes the client and releases the deadline.
func (cf *clientFlags) adminCtx(parent context.Context) (context.Context, *kadm.Client, func(), error) {
	adm, closeClient, err := cf.admin(parent)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(parent, cf.timeout)
	return ctx, adm, func() { cancel(); closeClient() }, nil
}

// splitList splits a comma-separated list, dropping empty elements.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseKeyValues parses repeated "k=v" flag values.
func parseKeyValues(flag string, kvs []string) ([][2]string, error) {
	out := make([][2]string, 0, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: expected key=value", flag, kv)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
