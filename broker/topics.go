package broker

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	wlog "github.com/weirhq/weir/broker/log"
	"github.com/weirhq/weir/vfs"
)

// The topic registry: every topic's name, UUID, partition count and config
// overrides, plus the cluster ID, persisted in one file under the data dir:
//
//	<data dir>/meta.json        {"magic":"weir-meta","version":1,"cluster_id":...,"topics":[...]}
//	<data dir>/logs/<topic>-<p>  one partition log (broker/log)
//
// meta.json is replaced atomically: written to meta.json.tmp, fsynced,
// renamed over meta.json, and the directory fsynced. Order of operations
// keeps the two consistent after a crash: partitions are opened before a
// new topic is recorded, a deleted topic is unrecorded before its
// partitions are removed, and on start any partition directory that
// belongs to no recorded topic is removed (logged).

const (
	metaFile    = "meta.json"
	metaMagic   = "weir-meta"
	metaVersion = 1
)

func logsDir(dataDir string) string { return filepath.Join(dataDir, "logs") }

type metaJSON struct {
	Magic     string      `json:"magic"`
	Version   int         `json:"version"`
	ClusterID string      `json:"cluster_id"`
	Topics    []topicJSON `json:"topics"`
}

type topicJSON struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // 32 hex digits
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// topic is an immutable snapshot of one topic: a change (configs,
// partitions) installs a new *topic in the registry. The logs are shared
// between snapshots.
type topic struct {
	name     string
	id       [16]byte
	internal bool
	configs  map[string]string // overrides only; never mutated
	parts    []*wlog.Log       // index = partition; never mutated
}

func (t *topic) partition(p int32) (*wlog.Log, bool) {
	if p < 0 || int(p) >= len(t.parts) {
		return nil, false
	}
	return t.parts[p], true
}

// registry is goroutine-safe. adminMu serialises changes (and their file
// writes); mu guards the maps for readers. Lock order: adminMu, then mu.
//
// Partitions are opened without adminMu (a wide topic takes a while, and
// other admin requests should not wait for it):
//   - a new topic's name is reserved in pending first, so no other create,
//     and no name collision, can race with it; it is invisible (get,
//     remove, addPartitions) until it is persisted and installed;
//   - a growing topic is claimed in growing: remove and addPartitions of
//     that topic wait for the claim to end (so no one removes the topic
//     under the new partitions or opens the same partitions twice), while
//     setConfigs proceeds (the growth applies the configs current when it
//     installs). The new partitions are invisible until the new count is
//     persisted and installed.
//
// A change is persisted before it is installed, so readers never see a
// topic or partition that a restart would not have.
type registry struct {
	fs     vfs.FS
	dir    string
	logs   *wlog.Manager
	logger *slog.Logger

	adminMu sync.Mutex
	// pending holds the names being created; the channel is closed when
	// the creation ends (installed or abandoned). adminMu guards it.
	pending map[string]chan struct{}
	// growing holds the topics whose partitions are being added; the
	// channel is closed when the growth ends. adminMu guards it.
	growing map[string]chan struct{}
	// openSem bounds the partitions opened at once across the broker.
	openSem chan struct{}
	// maxPartitions bounds a topic's partition count (tests lower it).
	maxPartitions int32

	mu        sync.RWMutex
	byName    map[string]*topic
	byID      map[[16]byte]*topic
	clusterID string
}

// openRegistry loads meta.json (if any), opens every partition and removes
// orphaned partition directories.
func openRegistry(fs vfs.FS, dir string, logs *wlog.Manager, logger *slog.Logger) (*registry, error) {
	return openRegistryLimited(fs, dir, logs, logger, maxPartitionsPerTopic)
}

func openRegistryLimited(fs vfs.FS, dir string, logs *wlog.Manager, logger *slog.Logger, maxPartitions int32) (*registry, error) {
	return openRegistryPool(fs, dir, logs, logger, maxPartitions, openConcurrency)
}

// openRegistryPool is openRegistryLimited with openPool partitions opened
// at once (benchmarks compare pool sizes).
func openRegistryPool(fs vfs.FS, dir string, logs *wlog.Manager, logger *slog.Logger, maxPartitions int32, openPool int) (*registry, error) {
	r := &registry{fs: fs, dir: dir, logs: logs, logger: logger, maxPartitions: maxPartitions,
		pending: map[string]chan struct{}{}, growing: map[string]chan struct{}{}, openSem: make(chan struct{}, openPool),
		byName: map[string]*topic{}, byID: map[[16]byte]*topic{}}
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.clusterID = m.ClusterID
	for _, tj := range m.Topics {
		id, err := parseTopicID(tj.ID)
		if err != nil || validateTopicName(tj.Name) != nil || tj.Partitions < 1 || tj.Partitions > r.maxPartitions {
			return nil, fmt.Errorf("%s: bad topic entry %q (id %q, %d partitions)", metaFile, tj.Name, tj.ID, tj.Partitions)
		}
		if _, dup := r.byName[tj.Name]; dup {
			return nil, fmt.Errorf("%s: topic %q listed twice", metaFile, tj.Name)
		}
		if _, dup := r.byID[id]; dup {
			return nil, fmt.Errorf("%s: topic id %s listed twice", metaFile, tj.ID)
		}
		t := &topic{name: tj.Name, id: id, internal: isInternalTopic(tj.Name), configs: map[string]string{}}
		for k, v := range tj.Configs {
			// Values are re-validated: a hand-edited file must not
			// feed the log configs it cannot parse.
			nv, err := validateTopicConfig(k, &v)
			if err != nil {
				return nil, fmt.Errorf("%s: topic %q: %w", metaFile, tj.Name, err)
			}
			t.configs[k] = nv
		}
		parts, err := r.openPartitions(tj.Name, 0, tj.Partitions, logConfig(t.configs), false)
		if err != nil {
			return nil, err
		}
		t.parts = parts
		r.byName[t.name] = t
		r.byID[t.id] = t
	}
	r.removeOrphans()
	return r, nil
}

func (r *registry) load() (metaJSON, error) {
	var m metaJSON
	data, err := vfs.ReadFile(r.fs, filepath.Join(r.dir, metaFile))
	if err != nil {
		if errors.Is(err, iofs.ErrNotExist) {
			return m, nil
		}
		return m, fmt.Errorf("read %s: %w", metaFile, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode %s: %w", metaFile, err)
	}
	if m.Magic != metaMagic || m.Version != metaVersion {
		return m, fmt.Errorf("%s: unsupported magic %q version %d", metaFile, m.Magic, m.Version)
	}
	return m, nil
}

// persist writes the registry to meta.json atomically.
// adminMu must be held.
func (r *registry) persist() error { return r.persistWith(nil) }

// persistWith writes the registry with next in place of the installed
// topic of its name (or added, if there is none), so that a change is
// durable before readers see it. adminMu must be held.
func (r *registry) persistWith(next *topic) error {
	r.mu.RLock()
	m := metaJSON{Magic: metaMagic, Version: metaVersion, ClusterID: r.clusterID}
	add := func(t *topic) {
		m.Topics = append(m.Topics, topicJSON{Name: t.name, ID: hex.EncodeToString(t.id[:]),
			Partitions: int32(len(t.parts)), Configs: t.configs})
	}
	for _, t := range r.byName {
		if next == nil || t.name != next.name {
			add(t)
		}
	}
	if next != nil {
		add(next)
	}
	r.mu.RUnlock()
	slices.SortFunc(m.Topics, func(a, b topicJSON) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(r.fs, filepath.Join(r.dir, metaFile), data)
}

// removeOrphans deletes partition directories of topics that are not
// recorded (a crash between unrecording a topic and removing its logs, or
// between opening a new topic's logs and recording it).
func (r *registry) removeOrphans() {
	names, err := r.fs.List(logsDir(r.dir))
	if err != nil {
		return // no logs dir yet
	}
	for _, n := range names {
		i := strings.LastIndexByte(n, '-')
		if i <= 0 {
			continue
		}
		p, err := strconv.ParseInt(n[i+1:], 10, 32)
		if err != nil {
			continue
		}
		t, ok := r.byName[n[:i]]
		if ok && p < int64(len(t.parts)) {
			continue
		}
		r.logger.Warn("removing orphaned partition directory", "dir", n)
		if _, open := r.logs.Get(n[:i], int32(p)); open {
			_ = r.logs.Remove(n[:i], int32(p))
		} else {
			_ = r.fs.RemoveAll(filepath.Join(logsDir(r.dir), n))
		}
	}
}

// openConcurrency bounds the partitions opened at once (over all topics):
// opening one is a few file creations and fsyncs, so a wide topic opens
// much faster with several in flight, and the bound keeps a burst of
// creations from exhausting file descriptors or threads.
const openConcurrency = 16

// openPartitions opens partitions [from, to) of a topic concurrently. On
// failure the ones opened are closed; if fresh (a new topic or new
// partitions; never on recovery) every partition of the range is removed,
// including the directory a failed open may have left behind.
func (r *registry) openPartitions(name string, from, to int32, cfg wlog.Config, fresh bool) ([]*wlog.Log, error) {
	parts := make([]*wlog.Log, to-from)
	errs := make([]error, to-from)
	var wg sync.WaitGroup
	for p := from; p < to; p++ {
		r.openSem <- struct{}{}
		wg.Go(func() {
			defer func() { <-r.openSem }()
			parts[p-from], errs[p-from] = r.logs.Open(name, p, cfg)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		if fresh {
			r.removePartitions(name, from, to)
		} else {
			for _, l := range parts {
				if l != nil {
					_ = l.Close()
				}
			}
		}
		return nil, fmt.Errorf("open partition %s-%d: %w", name, from+int32(i), err)
	}
	return parts, nil
}

// removePartitions closes and deletes partitions [from, to) of a topic, in
// parallel under openSem. Failures are logged: the directories of a topic
// that is not recorded are removed as orphans on the next start.
func (r *registry) removePartitions(name string, from, to int32) {
	var wg sync.WaitGroup
	for p := from; p < to; p++ {
		r.openSem <- struct{}{}
		wg.Go(func() {
			defer func() { <-r.openSem }()
			if err := r.logs.Remove(name, p); err != nil && !errors.Is(err, wlog.ErrClosed) {
				r.logger.Error("remove partition", "topic", name, "partition", p, "err", err)
			}
		})
	}
	wg.Wait()
}

// ensureClusterID returns the persisted cluster ID, persisting want (or a
// new one) on first start.
func (r *registry) ensureClusterID(want string) (string, error) {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	r.mu.Lock()
	if r.clusterID != "" {
		id := r.clusterID
		r.mu.Unlock()
		return id, nil
	}
	if want == "" {
		want = newClusterID()
	}
	r.clusterID = want
	r.mu.Unlock()
	if err := r.persist(); err != nil {
		return "", fmt.Errorf("persist cluster id: %w", err)
	}
	return want, nil
}

func (r *registry) get(name string) (*topic, bool) {
	r.mu.RLock()
	t, ok := r.byName[name]
	r.mu.RUnlock()
	return t, ok
}

func (r *registry) getByID(id [16]byte) (*topic, bool) {
	r.mu.RLock()
	t, ok := r.byID[id]
	r.mu.RUnlock()
	return t, ok
}

// all returns every topic sorted by name.
func (r *registry) all() []*topic {
	r.mu.RLock()
	ts := slices.Collect(maps.Values(r.byName))
	r.mu.RUnlock()
	slices.SortFunc(ts, func(a, b *topic) int { return strings.Compare(a.name, b.name) })
	return ts
}

// create validates and, unless validateOnly, creates a topic. configs are
// overrides, already validated by the caller. Errors are *kerr.Error
// values, possibly wrapped with a message (see kerrMsg). A creation of the
// same name in flight is waited for (then the topic exists, or, if that
// creation failed, this one proceeds).
func (r *registry) create(name string, partitions int32, configs map[string]string, validateOnly bool) (*topic, error) {
	t, err := r.beginCreate(name, partitions, configs, validateOnly, true)
	if err != nil || validateOnly {
		return t, err
	}
	return t, r.finishCreate(t, partitions)
}

// beginCreate runs every check of a creation and, unless validateOnly,
// reserves the name: the caller must then call finishCreate with the
// returned topic. A name being created by another request is
// TOPIC_ALREADY_EXISTS unless waitPending (then it waits for that
// creation's end and checks again).
func (r *registry) beginCreate(name string, partitions int32, configs map[string]string, validateOnly, waitPending bool) (*topic, error) {
	if err := validateTopicName(name); err != nil {
		return nil, err
	}
	if partitions < 1 {
		return nil, kerrMsg(kerr.InvalidPartitions, "number of partitions must be larger than 0")
	}
	if partitions > r.maxPartitions {
		return nil, kerrMsg(kerr.InvalidPartitions, fmt.Sprintf("at most %d partitions per topic", r.maxPartitions))
	}
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	for {
		ch, busy := r.pending[name]
		if !busy || !waitPending {
			break
		}
		r.adminMu.Unlock()
		<-ch
		r.adminMu.Lock()
	}
	if _, exists := r.get(name); exists || r.pending[name] != nil {
		return nil, kerrMsg(kerr.TopicAlreadyExists, fmt.Sprintf("topic '%s' already exists", name))
	}
	if collide := r.collision(name); collide != "" {
		return nil, kerrMsg(kerr.InvalidTopicException, fmt.Sprintf("topic '%s' collides with existing topic '%s' ('.' and '_' are equivalent in metric names)", name, collide))
	}
	t := &topic{name: name, id: newUUID(), internal: isInternalTopic(name), configs: configs}
	if t.configs == nil {
		t.configs = map[string]string{}
	}
	if !validateOnly {
		r.pending[name] = make(chan struct{})
	}
	return t, nil
}

// finishCreate opens the partitions of a topic reserved by beginCreate,
// records it and persists the registry; on failure nothing of it remains.
// The reservation ends either way.
func (r *registry) finishCreate(t *topic, partitions int32) (err error) {
	defer func() {
		r.adminMu.Lock()
		close(r.pending[t.name])
		delete(r.pending, t.name)
		r.adminMu.Unlock()
	}()
	parts, err := r.openPartitions(t.name, 0, partitions, logConfig(t.configs), true)
	if err != nil {
		return kerrMsg(kerr.KafkaStorageError, err.Error())
	}
	t.parts = parts
	r.adminMu.Lock()
	if err = r.persistWith(t); err == nil {
		r.install(t)
	}
	r.adminMu.Unlock()
	if err != nil {
		r.removePartitions(t.name, 0, partitions)
		return kerrMsg(kerr.KafkaStorageError, fmt.Sprintf("persist topic: %v", err))
	}
	r.logger.Info("topic created", "topic", t.name, "partitions", partitions, "configs", t.configs)
	return nil
}

// collision returns an existing or pending topic whose name equals name
// with '.' and '_' swapped (Kafka refuses those: their metric names
// collide). mu must not be held; adminMu must be held.
func (r *registry) collision(name string) string {
	norm := strings.ReplaceAll(name, ".", "_")
	r.mu.RLock()
	defer r.mu.RUnlock()
	for n := range r.byName {
		if n != name && strings.ReplaceAll(n, ".", "_") == norm {
			return n
		}
	}
	for n := range r.pending {
		if n != name && strings.ReplaceAll(n, ".", "_") == norm {
			return n
		}
	}
	return ""
}

// remove deletes a topic: unrecorded first, then its partitions removed.
// A non-zero id must match the topic's (a topic deleted and re-created
// since the caller looked it up is not deleted).
func (r *registry) remove(name string, id [16]byte) (*topic, error) {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	r.waitGrowthLocked(name)
	t, ok := r.get(name)
	if !ok || (id != [16]byte{} && t.id != id) {
		return nil, kerr.UnknownTopicOrPartition
	}
	r.mu.Lock()
	delete(r.byName, name)
	delete(r.byID, t.id)
	r.mu.Unlock()
	if err := r.persist(); err != nil {
		r.mu.Lock()
		r.byName[name] = t
		r.byID[t.id] = t
		r.mu.Unlock()
		return nil, kerrMsg(kerr.KafkaStorageError, fmt.Sprintf("persist topic deletion: %v", err))
	}
	// The topic is gone from the registry; a directory that fails to go
	// is removed as an orphan on the next start.
	r.removePartitions(name, 0, int32(len(t.parts)))
	r.logger.Info("topic deleted", "topic", name)
	return t, nil
}

// checkAddPartitions reports whether addPartitions(name, total) would be
// refused now (the answer may change before addPartitions runs).
func (r *registry) checkAddPartitions(name string, total int32) error {
	t, ok := r.get(name)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	return r.checkGrowth(t, total)
}

func (r *registry) checkGrowth(t *topic, total int32) error {
	have := int32(len(t.parts))
	switch {
	case total < have:
		return kerrMsg(kerr.InvalidPartitions, fmt.Sprintf("topic currently has %d partitions, which is higher than the requested %d", have, total))
	case total == have:
		return kerrMsg(kerr.InvalidPartitions, fmt.Sprintf("topic already has %d partitions", have))
	case total > r.maxPartitions:
		return kerrMsg(kerr.InvalidPartitions, fmt.Sprintf("at most %d partitions per topic", r.maxPartitions))
	}
	return nil
}

// addPartitions grows a topic to total partitions. The new partitions are
// opened without adminMu, under the topic's claim in growing; a failure
// removes them (the claim is held until they are gone, so no other growth
// opens them meanwhile) and leaves the topic as it was.
func (r *registry) addPartitions(name string, total int32, validateOnly bool) error {
	r.adminMu.Lock()
	r.waitGrowthLocked(name)
	t, ok := r.get(name)
	if !ok {
		r.adminMu.Unlock()
		return kerr.UnknownTopicOrPartition
	}
	if err := r.checkGrowth(t, total); err != nil || validateOnly {
		r.adminMu.Unlock()
		return err
	}
	done := make(chan struct{})
	r.growing[name] = done
	r.adminMu.Unlock()
	defer func() {
		r.adminMu.Lock()
		delete(r.growing, name)
		close(done)
		r.adminMu.Unlock()
	}()

	have := int32(len(t.parts))
	parts, err := r.openPartitions(name, have, total, logConfig(t.configs), true)
	if err != nil {
		return kerrMsg(kerr.KafkaStorageError, err.Error())
	}
	r.adminMu.Lock()
	// The claim kept the topic and its partition count; its configs may
	// have changed since the open.
	cur, _ := r.get(name)
	nt := *cur
	nt.parts = append(slices.Clip(slices.Clone(cur.parts)), parts...)
	if !maps.Equal(cur.configs, t.configs) {
		cfg := logConfig(cur.configs)
		for _, l := range parts {
			l.SetConfig(cfg)
		}
	}
	if err = r.persistWith(&nt); err == nil {
		r.install(&nt)
	}
	r.adminMu.Unlock()
	if err != nil {
		r.removePartitions(name, have, total)
		return kerrMsg(kerr.KafkaStorageError, fmt.Sprintf("persist partitions: %v", err))
	}
	r.logger.Info("partitions added", "topic", name, "from", have, "to", total)
	return nil
}

// waitGrowthLocked waits until no partitions are being added to name.
// adminMu must be held; it is released while waiting.
func (r *registry) waitGrowthLocked(name string) {
	for {
		ch, busy := r.growing[name]
		if !busy {
			return
		}
		r.adminMu.Unlock()
		<-ch
		r.adminMu.Lock()
	}
}

// setConfigs replaces a topic's overrides and applies them to its logs.
func (r *registry) setConfigs(name string, configs map[string]string) error {
	r.adminMu.Lock()
	defer r.adminMu.Unlock()
	t, ok := r.get(name)
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	nt := *t
	nt.configs = configs
	if err := r.persistWith(&nt); err != nil {
		return kerrMsg(kerr.KafkaStorageError, fmt.Sprintf("persist configs: %v", err))
	}
	r.install(&nt)
	cfg := logConfig(configs)
	for _, l := range nt.parts {
		l.SetConfig(cfg)
	}
	r.logger.Info("topic configs changed", "topic", name, "configs", configs)
	return nil
}

// install replaces the snapshot of t.name. adminMu must be held.
func (r *registry) install(t *topic) {
	r.mu.Lock()
	r.byName[t.name] = t
	r.byID[t.id] = t
	r.mu.Unlock()
}

// maxPartitionsPerTopic bounds one request's work; Kafka has no fixed limit
// but every partition is a directory and open files here.
const maxPartitionsPerTopic = 10000

var topicNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// validateTopicName applies Kafka's rules (Topic.validate).
func validateTopicName(name string) error {
	switch {
	case name == "":
		return kerrMsg(kerr.InvalidTopicException, "topic name is illegal, it can't be empty")
	case name == "." || name == "..":
		return kerrMsg(kerr.InvalidTopicException, "topic name cannot be \".\" or \"..\"")
	case len(name) > 249:
		return kerrMsg(kerr.InvalidTopicException, "topic name is illegal, it can't be longer than 249 characters")
	case !topicNameRE.MatchString(name):
		return kerrMsg(kerr.InvalidTopicException, fmt.Sprintf("topic name %q is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'", name))
	}
	return nil
}

func isInternalTopic(name string) bool {
	return name == offsetsTopic || name == "__transaction_state" || name == shareStateTopic
}

func parseTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("bad topic id %q", s)
	}
	copy(id[:], b)
	return id, nil
}

// kerrMsg is a Kafka error code with a message for the response's
// ErrorMessage field.
type kafkaError struct {
	code *kerr.Error
	msg  string
}

func kerrMsg(code *kerr.Error, msg string) error { return &kafkaError{code: code, msg: msg} }
func (e *kafkaError) Error() string              { return e.msg }
func (e *kafkaError) Unwrap() error              { return e.code }
