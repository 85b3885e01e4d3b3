package stream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// endTxn ends the round's transaction under ExactlyOnce: commit if the round
// handled every polled record, else abort. On commit the tasks' store
// writes are applied locally; on abort they are dropped and the client
// rewinds to the committed offsets, so the round is redone.
//
// Rebalances are blocked while a round runs and the transaction ends before
// they are allowed again, so a rebalance never aborts the work of tasks that
// stay.
func (a *App) endTxn(touched []*task, commit bool) error {
	if a.crash.Load() {
		// A killed process ends nothing: its transaction stays open until
		// the next incarnation (same transactional id) fences it, or the
		// transaction times out.
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	if commit {
		// Every record of the round must be acknowledged before the
		// transaction may commit: a failed output (fatal, recorded by
		// the produce promise) turns the commit into an abort.
		if err := a.cl.Flush(ctx); err != nil || a.fatalErr() != nil {
			commit = false
		}
	}
	try := kgo.TryAbort
	if commit {
		try = kgo.TryCommit
	}
	committed, err := a.sess.End(ctx, try)
	for _, t := range touched {
		if committed {
			if ferr := t.flushState(); ferr != nil && err == nil {
				err = ferr
			}
		} else {
			t.abortRound()
		}
	}
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	if committed {
		a.metrics.commits.Inc()
	} else if commit {
		a.cfg.logger.Warn("transaction aborted (rebalance or fencing); the round is processed again")
	}
	return nil
}

// instanceID returns this instance's id, kept in the state directory so a
// restarted instance uses the same transactional id and fences the
// transactions its previous incarnation left open.
func (a *App) instanceID() (string, error) {
	dir := filepath.Join(a.cfg.stateDir, a.id)
	path := filepath.Join(dir, "instance-id")
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if validTopic(id) == nil && len(id) == 32 {
			return id, nil
		}
		a.cfg.logger.Warn("invalid instance id file; writing a new one", "path", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("instance id: %w", err)
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}
