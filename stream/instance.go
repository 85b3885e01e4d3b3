package stream

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

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
