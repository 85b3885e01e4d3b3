package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// weir txn: list and describe transactional ids, show the producers of
// partitions and abort a hanging transaction, on weir or any
// Kafka-compatible cluster (ListTransactions, DescribeTransactions,
// DescribeProducers, WriteTxnMarkers: KIP-664).

func newTxnCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List, describe and abort transactions (any Kafka-compatible cluster)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cf := addClientFlags(cmd)
	cmd.AddCommand(newTxnListCmd(cf), newTxnDescribeCmd(cf), newTxnProducersCmd(cf), newTxnAbortCmd(cf))
	return cmd
}

func newTxnListCmd(cf *clientFlags) *cobra.Command {
	var (
		states  []string
		pids    []int64
		pattern string
		minAge  time.Duration
		output  *outputFlag
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
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
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
			js := []txnJSON{}
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
				if output.json() {
					j := txnJSON{TransactionalID: l.TxnID, State: l.State, ProducerID: l.ProducerID}
					if ok && d.Err == nil {
						j = describedTxnJSON(d, now)
					}
					js = append(js, j)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", l.TxnID, l.State, l.ProducerID, epoch, timeout, running, parts)
			}
			if output.json() {
				return writeJSON(cmd.OutOrStdout(), js)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringSliceVar(&states, "state", nil, "only these states (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	cmd.Flags().Int64SliceVar(&pids, "producer-id", nil, "only these producer ids")
	cmd.Flags().StringVar(&pattern, "pattern", "", "only transactional ids matching this regular expression (full match; brokers with ListTransactions v2)")
	cmd.Flags().DurationVar(&minAge, "older-than", 0, "only open transactions running for at least this long")
	output = addOutputFlag(cmd)
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

// txnJSON is one transactional id of `txn list -o json` and `txn describe
// -o json`. Fields the listing does not know are null.
type txnJSON struct {
	TransactionalID  string             `json:"transactional_id"`
	State            string             `json:"state"`
	ProducerID       int64              `json:"producer_id"`
	ProducerEpoch    *int16             `json:"producer_epoch"`
	TimeoutMs        *int32             `json:"timeout_ms"`
	StartTimestampMs *int64             `json:"start_timestamp_ms"` // null: none
	RunningMs        *int64             `json:"running_ms"`         // open transactions only
	Coordinator      *int32             `json:"coordinator"`
	Partitions       map[string][]int32 `json:"partitions"`
}

func describedTxnJSON(d kadm.DescribedTransaction, now time.Time) txnJSON {
	j := txnJSON{TransactionalID: d.TxnID, State: d.State, ProducerID: d.ProducerID,
		ProducerEpoch: &d.ProducerEpoch, TimeoutMs: &d.TimeoutMillis, Coordinator: &d.Coordinator,
		Partitions: map[string][]int32{}}
	if d.StartTimestamp >= 0 {
		j.StartTimestampMs = &d.StartTimestamp
		if isOpenTxnState(d.State) {
			ms := now.Sub(time.UnixMilli(d.StartTimestamp)).Milliseconds()
			j.RunningMs = &ms
		}
	}
	for t, ps := range d.Topics {
		for p := range ps {
			j.Partitions[t] = append(j.Partitions[t], p)
		}
		slices.Sort(j.Partitions[t])
	}
	return j
}

func newTxnDescribeCmd(cf *clientFlags) *cobra.Command {
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: state, producer id and epoch, timeout, start, partitions",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			described, err := adm.DescribeTransactions(ctx, ids...)
			if err != nil && len(described) == 0 {
				return fmt.Errorf("describe transactions: %w", err)
			}
			var failed []string
			js := []txnJSON{}
			for i, id := range ids {
				if i > 0 && !output.json() {
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
				if output.json() {
					js = append(js, describedTxnJSON(d, time.Now()))
					continue
				}
				printTxn(cmd.OutOrStdout(), d, time.Now())
			}
			if output.json() {
				if err := writeJSON(cmd.OutOrStdout(), js); err != nil {
					return err
				}
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
	output = addOutputFlag(cmd)
	return cmd
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

// producerJSON is one active producer of `txn producers -o json`.
type producerJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	LastSequence     int32  `json:"last_sequence"`
	LastTimestampMs  *int64 `json:"last_timestamp_ms"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	TxnStartOffset   *int64 `json:"txn_start_offset"` // null: no open transaction
}

func newTxnProducersCmd(cf *clientFlags) *cobra.Command {
	var olderThan time.Duration
	var output *outputFlag
	cmd := &cobra.Command{
		Use:   "producers TOPIC...",
		Short: "Show the active producers of partitions, with their open transaction's first offset",
		Example: `  weir txn producers orders
  weir txn producers orders --hanging 15m   # open transactions whose producer wrote nothing for 15m`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, topics []string) error {
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			md, err := adm.Metadata(ctx, topics...)
			if err != nil {
				return fmt.Errorf("metadata: %w", err)
			}
			set := make(kadm.TopicsSet)
			for _, t := range topics {
				td, ok := md.Topics[t]
				if !ok || td.Err != nil {
					return fmt.Errorf("topic %s: %v", t, td.Err)
				}
				for p := range td.Partitions {
					set.Add(t, p)
				}
			}
			described, err := adm.DescribeProducers(ctx, set)
			if err != nil && len(described) == 0 {
				return fmt.Errorf("describe producers: %w", err)
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tPRODUCER-ID\tEPOCH\tLAST-SEQUENCE\tLAST-WRITE\tCOORDINATOR-EPOCH\tTXN-START-OFFSET")
			var failed []string
			js := []producerJSON{}
			for _, p := range described.SortedPartitions() {
				if p.Err != nil {
					failed = append(failed, fmt.Sprintf("%s/%d: %v", p.Topic, p.Partition, p.Err))
					continue
				}
				for _, pr := range p.ActiveProducers.Sorted() {
					last := time.UnixMilli(pr.LastTimestamp)
					if olderThan > 0 && (pr.CurrentTxnStartOffset < 0 || now.Sub(last) < olderThan) {
						continue
					}
					if output.json() {
						j := producerJSON{Topic: pr.Topic, Partition: pr.Partition, ProducerID: pr.ProducerID, ProducerEpoch: pr.ProducerEpoch,
							LastSequence: pr.LastSequence, CoordinatorEpoch: pr.CoordinatorEpoch}
						if pr.LastTimestamp >= 0 {
							j.LastTimestampMs = &pr.LastTimestamp
						}
						if pr.CurrentTxnStartOffset >= 0 {
							j.TxnStartOffset = &pr.CurrentTxnStartOffset
						}
						js = append(js, j)
						continue
					}
					start := "-"
					if pr.CurrentTxnStartOffset >= 0 {
						start = strconv.FormatInt(pr.CurrentTxnStartOffset, 10)
					}
					lastStr := "-"
					if pr.LastTimestamp >= 0 {
						lastStr = last.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", pr.Topic, pr.Partition, pr.ProducerID, pr.ProducerEpoch,
						pr.LastSequence, lastStr, pr.CoordinatorEpoch, start)
				}
			}
			if output.json() {
				if err := writeJSON(cmd.OutOrStdout(), js); err != nil {
					return err
				}
			} else if err := tw.Flush(); err != nil {
				return err
			}
			if len(failed) > 0 {
				return errors.New(strings.Join(failed, "; "))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&olderThan, "hanging", 0, "only producers with an open transaction and no write for at least this long")
	output = addOutputFlag(cmd)
	return cmd
}

func newTxnAbortCmd(cf *clientFlags) *cobra.Command {
	var (
		topic            string
		partition        int32
		startOffset      int64
		producerID       int64
		producerEpoch    int16
		coordinatorEpoch int32
	)
	cmd := &cobra.Command{
		Use:   "abort",
		Short: "Abort a hanging transaction in one partition (writes an ABORT marker, KIP-664)",
		Long: `Abort writes an ABORT marker for one producer into one partition, ending a transaction
that its coordinator no longer knows (a "hanging" transaction that holds the last stable
offset back). Name the transaction by the first offset it wrote (--start-offset, found
with "weir txn producers"), or give the producer id and epoch explicitly.
Only use it on a transaction that no live producer will complete.`,
		Example: `  weir txn abort --topic orders --partition 3 --start-offset 1200
  weir txn abort --topic orders --partition 3 --producer-id 4001 --producer-epoch 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if topic == "" || partition < 0 {
				return errors.New("--topic and --partition are required")
			}
			if (startOffset < 0) == (producerID < 0) {
				return errors.New("give either --start-offset or --producer-id (with --producer-epoch)")
			}
			ctx, adm, done, err := cf.adminCtx(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if startOffset >= 0 {
				set := make(kadm.TopicsSet)
				set.Add(topic, partition)
				described, err := adm.DescribeProducers(ctx, set)
				if err != nil && len(described) == 0 {
					return fmt.Errorf("describe producers: %w", err)
				}
				found := false
				described.EachProducer(func(p kadm.DescribedProducer) {
					if p.Topic == topic && p.Partition == partition && p.CurrentTxnStartOffset == startOffset {
						producerID, producerEpoch, coordinatorEpoch, found = p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, true
					}
				})
				if !found {
					return fmt.Errorf("no open transaction starting at offset %d in %s/%d", startOffset, topic, partition)
				}
			} else if producerEpoch < 0 {
				return errors.New("--producer-epoch is required with --producer-id")
			}
			set := make(kadm.TopicsSet)
			set.Add(topic, partition)
			resps, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
				ProducerID: producerID, ProducerEpoch: producerEpoch, Commit: false,
				CoordinatorEpoch: coordinatorEpoch, Topics: set,
			})
			if err != nil && len(resps) == 0 {
				return fmt.Errorf("write marker: %w", err)
			}
			var perr error
			ok := false
			resps.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
				if p.Topic == topic && p.Partition == partition {
					ok, perr = true, p.Err
				}
			})
			switch {
			case !ok:
				return fmt.Errorf("no answer for %s/%d", topic, partition)
			case perr != nil:
				return fmt.Errorf("abort %s/%d: %w", topic, partition, perr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "aborted the transaction of producer %d (epoch %d) in %s/%d\n", producerID, producerEpoch, topic, partition)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&topic, "topic", "", "topic of the partition")
	f.Int32Var(&partition, "partition", -1, "partition")
	f.Int64Var(&startOffset, "start-offset", -1, "first offset of the transaction to abort (see weir txn producers)")
	f.Int64Var(&producerID, "producer-id", -1, "producer id of the transaction")
	f.Int16Var(&producerEpoch, "producer-epoch", -1, "producer epoch of the transaction")
	f.Int32Var(&coordinatorEpoch, "coordinator-epoch", 0, "coordinator epoch written in the marker")
	return cmd
}
