package surge

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Board is the table SurgeTopic describes: the latest ZoneStats per zone.
// Records may be applied more than once (at-least-once delivery replays
// updates): the latest update of a zone wins, which is why the topic is an
// upsert stream. Safe for concurrent use.
type Board struct {
	mu      sync.Mutex
	zones   map[string]ZoneStats
	updates int64
}

// NewBoard returns an empty board.
func NewBoard() *Board { return &Board{zones: map[string]ZoneStats{}} }

// Apply takes one record of SurgeTopic. A tombstone (null value: the zone
// was forgotten) removes the zone. A record that does not decode is an
// error and changes nothing.
func (b *Board) Apply(r *kgo.Record) error {
	if r.Value == nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.zones, string(r.Key))
		b.updates++
		return nil
	}
	var z ZoneStats
	if err := json.Unmarshal(r.Value, &z); err != nil {
		return fmt.Errorf("%s %d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if z.Zone == "" {
		z.Zone = string(r.Key)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.zones[z.Zone] = z
	b.updates++
	return nil
}

// Updates is the number of records applied so far.
func (b *Board) Updates() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.updates
}

// Requests is the number of requests the board's zones count.
func (b *Board) Requests() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var n int64
	for _, z := range b.zones {
		n += z.Requests
	}
	return n
}

// Snapshot returns the zones, sorted by name.
func (b *Board) Snapshot() []ZoneStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ZoneStats, 0, len(b.zones))
	for _, z := range b.zones {
		out = append(out, z)
	}
	slices.SortFunc(out, func(a, b ZoneStats) int { return strings.Compare(a.Zone, b.Zone) })
	return out
}

// Render writes the board as an aligned table, one line per zone, and
// returns the number of lines written.
func (b *Board) Render(w io.Writer) (lines int, err error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "zone\trequests\tdemand/min\tdrivers\tsurge\t")
	for _, z := range b.Snapshot() {
		// One mark per 0.1 above 1.0; the record may come from any
		// producer, so the length is clamped (NaN gives none).
		marks := 0
		if s := (z.Surge - 1) * 10; s > 0 {
			marks = int(min(s, 40) + 0.5)
		}
		bar := strings.Repeat("▮", marks)
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%d\t%.1fx\t %s\n", z.Zone, z.Requests, z.Demand, z.Drivers, z.Surge, bar)
		lines++
	}
	return lines + 1, tw.Flush()
}
