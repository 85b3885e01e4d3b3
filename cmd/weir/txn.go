package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// weir txn: list and describe transactional ids on weir or any
// Kafka-compatible cluster (ListTransactions / DescribeTransactions,
// KIP-664).

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions (any Kafka-compatible cluster)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTxnListCmd(cf), newTxnDescribeCmd(cf))
	return cmd
}

func newTxnListCmd(cf *clientFlags) *cobra.Command {
	var (
		states  []string
		pids    []int64
		pattern string
		minAge  time.Duration
	)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List transactional ids with their state, producer and running time",
		Example: `  weir txn list
  weir txn list --state Ongoing --older-than 1m     # transactions that may be hanging
  weir txn list --pattern 'orders-.*'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			adm, done, err := cf.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			listed, err := adm.ListTransactionsByTxPattern(ctx, pids, states, pattern)
			if err != nil && len(listed) == 0 {
				return fmt.Errorf("list transactions: %w", err)
			}
			ids := listed.TransactionalIDs()
			var described kadm.DescribedTransactions
			if len(ids) > 0 {
				described, err = adm.DescribeTransactions(ctx, ids...)
				if err != nil && len(described) == 0 {
					return fmt.Errorf("describe transactions: %w", err)
				}
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TRANSACTIONAL-ID\tSTATE\tPRODUCER-ID\tEPOCH\tTIMEOUT\tRUNNING\tPARTITIONS")
			for _, l := range listed.Sorted() {
				d, ok := described[l.TxnID]
				epoch, timeout, running, parts := "-", "-", "-", "-"
				if ok && d.Err == nil {
					epoch = strconv.Itoa(int(d.ProducerEpoch))
					timeout = (time.Duration(d.TimeoutMillis) * time.Millisecond).String()
					parts = strconv.Itoa(countPartitions(d.Topics))
					if d.StartTimestamp >= 0 && isOpenTxnState(d.State) {
						age := now.Sub(time.UnixMilli(d.StartTimestamp))
						if minAge > 0 && age < minAge {
							continue
						}
						running = age.Truncate(time.Millisecond).String()
					} else if minAge > 0 {
						continue
					}
				} else if minAge > 0 {
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", l.TxnID, l.State, l.ProducerID, epoch, timeout, running, parts)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	cmd.Flags().Int64SliceVar(&pids, "producer-id", nil, "only these producer ids")
	cmd.Flags().StringVar(&pattern, "pattern", "", "only transactional ids matching this regular expression (full match; brokers with ListTransactions v2)")
	cmd.Flags().DurationVar(&minAge, "older-than", 0, "only open transactions running for at least this long")
	return cmd
}

// isOpenTxnState reports whether a transaction in this state is running
// (its start time is meaningful for "how long").
func isOpenTxnState(s string) bool {
	switch s {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

func countPartitions(ts kadm.TopicsSet) int {
	n := 0
	for _, ps := range ts {
		n += len(ps)
	}
	return n
}

func newTxnDescribeCmd(cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: state, producer id and epoch, timeout, start, partitions",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			adm, done, err := cf.admin()
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := context.WithTimeout(cmd.Context(), cf.timeout)
			defer cancel()
			described, err := adm.DescribeTransactions(ctx, ids...)
			if err != nil && len(described) == 0 {
				return fmt.Errorf("describe transactions: %w", err)
			}
			var failed []string
			for i, id := range ids {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				d, ok := described[id]
				switch {
				case !ok:
					failed = append(failed, fmt.Sprintf("%s: no answer", id))
					continue
				case errors.Is(d.Err, kerr.TransactionalIDNotFound):
					failed = append(failed, fmt.Sprintf("%s: transactional id not found", id))
					continue
				case d.Err != nil:
					failed = append(failed, fmt.Sprintf("%s: %v", id, d.Err))
					continue
				}
				printTxn(cmd.OutOrStdout(), d, time.Now())
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

func printTxn(w io.Writer, d kadm.DescribedTransaction, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "Transactional ID:\t%s\n", d.TxnID)
	fmt.Fprintf(tw, "State:\t%s\n", d.State)
	fmt.Fprintf(tw, "Producer ID:\t%d\n", d.ProducerID)
	fmt.Fprintf(tw, "Producer epoch:\t%d\n", d.ProducerEpoch)
	fmt.Fprintf(tw, "Timeout:\t%s\n", time.Duration(d.TimeoutMillis)*time.Millisecond)
	if d.StartTimestamp >= 0 {
		start := time.UnixMilli(d.StartTimestamp)
		line := start.UTC().Format(time.RFC3339Nano)
		if isOpenTxnState(d.State) {
			line += fmt.Sprintf(" (running %s)", now.Sub(start).Truncate(time.Millisecond))
		}
		fmt.Fprintf(tw, "Started:\t%s\n", line)
	} else {
		fmt.Fprintf(tw, "Started:\t-\n")
	}
	fmt.Fprintf(tw, "Coordinator:\t%d\n", d.Coordinator)
	fmt.Fprintf(tw, "Partitions:\t%d\n", countPartitions(d.Topics))
	tw.Flush()
	topics := make([]string, 0, len(d.Topics))
	for t := range d.Topics {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		var ps []int
		for p := range d.Topics[t] {
			ps = append(ps, int(p))
		}
		sort.Ints(ps)
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = strconv.Itoa(p)
		}
		fmt.Fprintf(w, "  %s: %s\n", t, strings.Join(strs, ","))
	}
}
