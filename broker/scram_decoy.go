package broker

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"

	"github.com/weirhq/weir/vfs"
)

// The key of the SCRAM decoys (auth.NewScramSession's secret): an unknown
// user's decoy salt is an HMAC of the name under it, so the salt a probe
// sees for a name must not change when the broker restarts, or a probe
// before and after a restart would tell unknown names (new salt) from
// users (same salt). It is kept in the data directory:
//
//	<data dir>/scram-decoy.json  {"magic":"weir-scram-decoy","version":1,"key":"<base64, 32 bytes>"}
//
// written once, atomically (vfs.WriteFileAtomic), before the first SASL
// exchange. Whoever reads it can compute every decoy salt, so it is as
// secret as scram.json.
const scramDecoyFile = "scram-decoy.json"

const (
	scramDecoyMagic   = "weir-scram-decoy"
	scramDecoyVersion = 1
	scramDecoyKeySize = 32
)

type scramDecoyJSON struct {
	Magic   string `json:"magic"`
	Version int    `json:"version"`
	Key     []byte `json:"key"`
}

// loadScramDecoyKey returns the decoy key of dataDir, creating it on first
// use.
func loadScramDecoyKey(fs vfs.FS, dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, scramDecoyFile)
	data, err := vfs.ReadFile(fs, path)
	switch {
	case err == nil:
		var f scramDecoyJSON
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", scramDecoyFile, err)
		}
		if f.Magic != scramDecoyMagic || f.Version != scramDecoyVersion || len(f.Key) != scramDecoyKeySize {
			return nil, fmt.Errorf("%s: unsupported magic %q version %d or a key of %d bytes", scramDecoyFile, f.Magic, f.Version, len(f.Key))
		}
		return f.Key, nil
	case !errors.Is(err, iofs.ErrNotExist):
		return nil, fmt.Errorf("read %s: %w", scramDecoyFile, err)
	}
	f := scramDecoyJSON{Magic: scramDecoyMagic, Version: scramDecoyVersion, Key: make([]byte, scramDecoyKeySize)}
	if _, err := rand.Read(f.Key); err != nil {
		return nil, err
	}
	data, err = json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if err := vfs.WriteFileAtomic(fs, path, data); err != nil {
		return nil, fmt.Errorf("write %s: %w", scramDecoyFile, err)
	}
	return f.Key, nil
}
