// Command weir is the weir binary: a single-node Kafka-protocol broker
// (weir serve) and the tools to work with any Kafka-compatible cluster
// (weir topic, produce, consume, group, txn).
//
// The command layer is deliberately thin: every subcommand parses flags,
// builds a broker.Config or a franz-go client, and calls into the library.
// Each subcommand lives in its own file (serve.go, topic.go, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args and returns the process exit code.
// SIGINT and SIGTERM cancel the command's context (serve shuts down
// cleanly, consume stops); a second signal kills the process the default
// way, so a stuck shutdown can always be interrupted.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // restore default signal handling: the next signal terminates
	}()

	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		fmt.Fprintln(stderr, "weir:", err)
		return 1
	}
	return 0
}

// exitError ends the process with a specific code without printing
// anything more (the command already reported the problem).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// newRootCmd builds the whole command tree. It holds no global state, so
// tests build a fresh tree per invocation.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "weir",
		Short: "weir: a durable single-node Kafka-protocol broker and the tools around it",
		Long: `weir is one binary for streaming data: an embedded, durable, single-node broker that
speaks the Apache Kafka wire protocol (weir serve), and command-line tools that work
against weir or any Kafka-compatible cluster (weir topic, produce, consume, group, txn).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newServeCmd(),
		newDevCmd(), // dev.go
		newTopicCmd(),
		newProduceCmd(),
		newConsumeCmd(),
		newGroupCmd(),    // group.go
		newDescribeCmd(), // describe.go
		newTxnCmd(),      // txn.go
		newACLCmd(),      // acl.go
		newQuotaCmd(),    // quota.go
		newRegistryCmd(), // registry.go
		newSchemaCmd(),   // schema.go
		newBenchCmd(),    // bench_nexmark.go
		newUserCmd(),     // user.go
		newMirrorCmd(),   // mirror.go
		newVersionCmd(),
	)
	return root
}
