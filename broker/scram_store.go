package broker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/weirhq/weir/broker/auth"
	"github.com/weirhq/weir/vfs"
)

// SCRAM credentials, one file in the data directory:
//
//	<data dir>/scram.json  {"magic":"weir-scram","version":1,"credentials":[
//	                         {"user":..,"mechanism":"SCRAM-SHA-256","iterations":4096,
//	                          "salt":b64,"stored_key":b64,"server_key":b64}, ...]}
//
// Only salt, iteration count, StoredKey and ServerKey are kept (RFC 5802):
// no password, no salted password. The file is replaced atomically
// (vfs.WriteFileAtomic: written, fsynced, renamed, directory fsynced)
// before a change is visible, so an acknowledged AlterUserScramCredentials
// survives a crash. It is as sensitive as a password hash file: protect
// the data directory accordingly.

const (
	scramFile    = "scram.json"
	scramMagic   = "weir-scram"
	scramVersion = 1
)

type scramFileJSON struct {
	Magic       string          `json:"magic"`
	Version     int             `json:"version"`
	Credentials []scramCredJSON `json:"credentials"`
}

type scramCredJSON struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Iterations int    `json:"iterations"`
	Salt       string `json:"salt"`
	StoredKey  string `json:"stored_key"`
	ServerKey  string `json:"server_key"`
}

// scramStore holds the SCRAM credentials. Safe for concurrent use:
// writeMu serialises changes (and their file writes), mu guards the map
// for readers. Lock order: writeMu, then mu.
type scramStore struct {
	fs   vfs.FS
	path string

	writeMu sync.Mutex
	mu      sync.RWMutex
	creds   map[[2]string]auth.ScramCredential // user, mechanism
}

var _ auth.Credentials = (*scramStore)(nil)

func openScramStore(fs vfs.FS, dataDir string) (*scramStore, error) {
	s := &scramStore{fs: fs, path: filepath.Join(dataDir, scramFile), creds: map[[2]string]auth.ScramCredential{}}
	data, err := vfs.ReadFile(fs, s.path)
	if errors.Is(err, iofs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", scramFile, err)
	}
	var f scramFileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decode %s: %w", scramFile, err)
	}
	if f.Magic != scramMagic || f.Version != scramVersion {
		return nil, fmt.Errorf("%s: unsupported magic %q version %d", scramFile, f.Magic, f.Version)
	}
	b64 := base64.StdEncoding
	for i, c := range f.Credentials {
		salt, e1 := b64.DecodeString(c.Salt)
		sk, e2 := b64.DecodeString(c.StoredKey)
		vk, e3 := b64.DecodeString(c.ServerKey)
		if e := errors.Join(e1, e2, e3); e != nil || auth.ScramHash(c.Mechanism) == nil || c.User == "" {
			return nil, fmt.Errorf("%s: credential %d (user %q): corrupt entry", scramFile, i, c.User)
		}
		s.creds[[2]string{c.User, c.Mechanism}] = auth.ScramCredential{
			Mechanism: c.Mechanism, Salt: salt, Iterations: c.Iterations, StoredKey: sk, ServerKey: vk,
		}
	}
	return s, nil
}

// ScramCredential implements auth.Credentials.
func (s *scramStore) ScramCredential(user, mech string) (auth.ScramCredential, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.creds[[2]string{user, mech}]
	return c, ok
}

// userCreds is one user's credentials, sorted by mechanism.
type userCreds struct {
	User  string
	Creds []auth.ScramCredential
}

// list returns the users with credentials, sorted by name.
func (s *scramStore) list() []userCreds {
	s.mu.RLock()
	byUser := map[string][]auth.ScramCredential{}
	for k, c := range s.creds {
		byUser[k[0]] = append(byUser[k[0]], c)
	}
	s.mu.RUnlock()
	out := make([]userCreds, 0, len(byUser))
	for u, cs := range byUser {
		slices.SortFunc(cs, func(a, b auth.ScramCredential) int { return strings.Compare(a.Mechanism, b.Mechanism) })
		out = append(out, userCreds{User: u, Creds: cs})
	}
	slices.SortFunc(out, func(a, b userCreds) int { return strings.Compare(a.User, b.User) })
	return out
}

// scramChange is one upsertion (Cred set) or deletion (Cred nil).
type scramChange struct {
	User, Mechanism string
	Cred            *auth.ScramCredential
}

// apply makes the changes durable, then visible. All or nothing.
func (s *scramStore) apply(changes []scramChange) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.RLock()
	next := make(map[[2]string]auth.ScramCredential, len(s.creds)+len(changes))
	for k, v := range s.creds {
		next[k] = v
	}
	s.mu.RUnlock()
	for _, ch := range changes {
		k := [2]string{ch.User, ch.Mechanism}
		if ch.Cred == nil {
			delete(next, k)
		} else {
			next[k] = *ch.Cred
		}
	}
	f := scramFileJSON{Magic: scramMagic, Version: scramVersion, Credentials: []scramCredJSON{}}
	b64 := base64.StdEncoding
	for k, c := range next {
		f.Credentials = append(f.Credentials, scramCredJSON{User: k[0], Mechanism: k[1], Iterations: c.Iterations,
			Salt: b64.EncodeToString(c.Salt), StoredKey: b64.EncodeToString(c.StoredKey), ServerKey: b64.EncodeToString(c.ServerKey)})
	}
	slices.SortFunc(f.Credentials, func(a, b scramCredJSON) int {
		if c := strings.Compare(a.User, b.User); c != 0 {
			return c
		}
		return strings.Compare(a.Mechanism, b.Mechanism)
	})
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := vfs.WriteFileAtomic(s.fs, s.path, data); err != nil {
		return fmt.Errorf("write %s: %w", scramFile, err)
	}
	s.mu.Lock()
	s.creds = next
	s.mu.Unlock()
	return nil
}

// SetScramPassword stores a SCRAM credential for user, derived from
// password with a fresh random salt, in the data directory of a broker
// that is not running (it takes the data directory's lock, failing with
// ErrDataDirLocked while a broker holds it). It is how the first user of
// a broker with only SASL listeners is created; later ones can be managed
// with AlterUserScramCredentials.
func SetScramPassword(fs vfs.FS, dataDir, user, mechanism, password string, iterations int) error {
	if fs == nil {
		fs = vfs.Default
	}
	if user == "" {
		return errors.New("empty user name")
	}
	if err := vfs.MkdirAllDurable(fs, dataDir); err != nil {
		return err
	}
	lock, err := lockDataDir(fs, dataDir)
	if err != nil {
		return err
	}
	defer lock.release()
	s, err := openScramStore(fs, dataDir)
	if err != nil {
		return err
	}
	if iterations == 0 {
		iterations = auth.MinIterations
	}
	c, err := auth.NewScramCredentialFromPassword(mechanism, password, iterations)
	if err != nil {
		return err
	}
	if c.Iterations < auth.MinIterations || c.Iterations > auth.MaxIterations {
		return fmt.Errorf("iterations %d outside [%d, %d]", c.Iterations, auth.MinIterations, auth.MaxIterations)
	}
	return s.apply([]scramChange{{User: user, Mechanism: mechanism, Cred: &c}})
}

// DeleteScramUser removes user's credentials (every mechanism) from the
// data directory of a broker that is not running; false if it had none.
func DeleteScramUser(fs vfs.FS, dataDir, user string) (bool, error) {
	if fs == nil {
		fs = vfs.Default
	}
	lock, err := lockDataDir(fs, dataDir)
	if err != nil {
		return false, err
	}
	defer lock.release()
	s, err := openScramStore(fs, dataDir)
	if err != nil {
		return false, err
	}
	var changes []scramChange
	for _, mech := range []string{auth.ScramSHA256, auth.ScramSHA512} {
		if _, ok := s.ScramCredential(user, mech); ok {
			changes = append(changes, scramChange{User: user, Mechanism: mech})
		}
	}
	if len(changes) == 0 {
		return false, nil
	}
	return true, s.apply(changes)
}

// ScramUsers lists the users and their mechanisms stored in the data
// directory of a broker that is not running.
func ScramUsers(fs vfs.FS, dataDir string) (map[string][]string, error) {
	if fs == nil {
		fs = vfs.Default
	}
	lock, err := lockDataDir(fs, dataDir)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	s, err := openScramStore(fs, dataDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, u := range s.list() {
		for _, c := range u.Creds {
			out[u.User] = append(out[u.User], c.Mechanism)
		}
	}
	return out, nil
}
