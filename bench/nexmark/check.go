package nexmark

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Output is one record of a query's output topic. Check wants a topic's
// records in offset order within each partition.
type Output struct {
	Partition int32
	Key       []byte
	Value     []byte // nil: a tombstone
}

// CheckError is returned by Check when a query's output differs from the
// batch reference. Missing are results of the reference the output lacks
// and Unexpected output results the reference lacks (as canonical JSON, a
// few of each).
type CheckError struct {
	Query                 string
	Got, Want             int
	Missing, Unexpected   []string
	MissingN, UnexpectedN int
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nexmark %s: output differs from the batch reference: %d results, want %d; %d missing, %d unexpected",
		e.Query, e.Got, e.Want, e.MissingN, e.UnexpectedN)
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "; missing e.g. %s", strings.Join(e.Missing, " "))
	}
	if len(e.Unexpected) > 0 {
		fmt.Fprintf(&b, "; unexpected e.g. %s", strings.Join(e.Unexpected, " "))
	}
	return b.String()
}

// Check compares the complete output of a bounded run of query over events
// with the query's batch reference (Q0 ... Q11):
//   - q0, q1, q2, q3 and the windowed queries: the output values, as a
//     multiset, equal the reference's results (the stream queries keep
//     order within an input partition, but the output's partitions do not
//     follow the input's);
//   - q4 and q6, whose results are tables: the latest value per key (a
//     tombstone deletes the key) equals the reference, and each key is its
//     row's category (q4) or seller (q6), Int64-encoded.
//
// Values must decode strictly into the reference's result type (no unknown
// fields). Check does not know the queries of other names.
func Check(query string, events []Event, out []Output) error {
	switch query {
	case "q0":
		return multiset(query, out, Q0(events), Decode)
	case "q1":
		return multiset(query, out, Q1(events), strict[Q1Result])
	case "q2":
		return multiset(query, out, Q2(events), strict[Q2Result])
	case "q3":
		return multiset(query, out, Q3(events), strict[Q3Result])
	case "q4":
		return table(query, out, Q4(events), func(r Q4Result) int64 { return r.Category })
	case "q5":
		return multiset(query, out, Q5(events), strict[Q5Result])
	case "q6":
		return table(query, out, Q6(events), func(r Q6Result) int64 { return r.Seller })
	case "q7":
		return multiset(query, out, Q7(events), strict[Q7Result])
	case "q8":
		return multiset(query, out, Q8(events), strict[Q8Result])
	case "q11":
		return multiset(query, out, Q11(events), strict[Q11Result])
	}
	return fmt.Errorf("%w %q: no check", ErrUnknownQuery, query)
}

// strict decodes one JSON value of T, refusing unknown fields and trailing
// data.
func strict[T any](b []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, errors.New("trailing data")
	}
	return v, nil
}

// multiset compares the output values, decoded and re-encoded, with want
// as multisets of canonical JSON.
func multiset[T any](query string, out []Output, want []T, decode func([]byte) (T, error)) error {
	got := make([]string, 0, len(out))
	for i, o := range out {
		if o.Value == nil {
			return fmt.Errorf("nexmark %s: output record %d (partition %d) is a tombstone", query, i, o.Partition)
		}
		v, err := decode(o.Value)
		if err != nil {
			return fmt.Errorf("nexmark %s: output record %d (partition %d): %w", query, i, o.Partition, err)
		}
		c, err := json.Marshal(v)
		if err != nil {
			return err
		}
		got = append(got, string(c))
	}
	return compare(query, got, canonical(want))
}

// table compares the latest value per key of the output with want, whose
// rows are keyed by keyOf.
func table[T any](query string, out []Output, want []T, keyOf func(T) int64) error {
	latest := map[int64][]byte{}
	for i, o := range out {
		if len(o.Key) != 8 {
			return fmt.Errorf("nexmark %s: output record %d (partition %d): key of %d bytes, want an 8-byte Int64",
				query, i, o.Partition, len(o.Key))
		}
		k := int64(binary.BigEndian.Uint64(o.Key))
		if o.Value == nil {
			delete(latest, k)
			continue
		}
		v, err := strict[T](o.Value)
		if err != nil {
			return fmt.Errorf("nexmark %s: output record %d (partition %d): %w", query, i, o.Partition, err)
		}
		if keyOf(v) != k {
			return fmt.Errorf("nexmark %s: output record %d (partition %d): key %d, value of row %d", query, i, o.Partition, k, keyOf(v))
		}
		latest[k] = o.Value
	}
	var got []string
	for _, b := range latest {
		v, _ := strict[T](b)
		c, err := json.Marshal(v)
		if err != nil {
			return err
		}
		got = append(got, string(c))
	}
	return compare(query, got, canonical(want))
}

func canonical[T any](rs []T) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		c, _ := json.Marshal(r)
		out = append(out, string(c))
	}
	return out
}

// compare reports how the multisets got and want differ, nil if they do
// not.
func compare(query string, got, want []string) error {
	slices.Sort(got)
	slices.Sort(want)
	e := &CheckError{Query: query, Got: len(got), Want: len(want)}
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i] < want[j]):
			e.UnexpectedN++
			if len(e.Unexpected) < 3 {
				e.Unexpected = append(e.Unexpected, got[i])
			}
			i++
		case i == len(got) || want[j] < got[i]:
			e.MissingN++
			if len(e.Missing) < 3 {
				e.Missing = append(e.Missing, want[j])
			}
			j++
		default:
			i++
			j++
		}
	}
	if e.MissingN == 0 && e.UnexpectedN == 0 {
		return nil
	}
	return e
}
