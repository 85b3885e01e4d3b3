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
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// groupInstanceID returns the App's group.instance.id (see
// GroupInstanceID): the option's, or "<app id>-<instance id>". "" means
// dynamic membership.
func (a *App) groupInstanceID() (string, error) {
	if a.cfg.groupInstanceIDSet {
		return a.cfg.groupInstanceID, nil
	}
	id, err := a.instanceID()
	if err != nil {
		return "", err
	}
	return a.id + "-" + id, nil
}

// leaveGroup removes the static member instance from the group, so that
// its tasks move to the other members at once: a static member's client
// does not leave when it closes (KIP-345). Called after the session's
// client closed (its revocations committed), with a client of its own.
func (a *App) leaveGroup(instance string) {
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		a.cfg.logger.Warn("leave group: client", "err", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	resps, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(a.id).InstanceIDs(instance).
		Reason("stream: App stopped"))
	if err == nil {
		err = resps.Error()
	}
	if err != nil && !errors.Is(err, kerr.UnknownMemberID) {
		a.cfg.logger.Warn("leave group failed; the group moves this instance's tasks after its session timeout",
			"instance", instance, "err", err)
	}
}

// leaveTimeout bounds leaveGroup.
const leaveTimeout = 10 * time.Second

// instanceID returns this instance's id, kept in the state directory so a
// restarted instance uses the same group instance id (static membership:
// it takes its tasks back at once) and, under ExactlyOnce, the same
// transactional id (it fences the transactions its previous incarnation
// left open).
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
