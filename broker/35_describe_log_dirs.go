package broker

import (
	"context"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs: v0-4
//
// Behavior:
// * One log dir: <data dir>/logs. Topics null lists every partition of
//   every topic (internal ones included, as Kafka does); otherwise the
//   named partitions that exist (unknown ones are omitted, as Kafka does).
// * Size is the partition's bytes on disk; OffsetLag is 0 (no follower);
//   IsFuture false.
// * v4: TotalBytes and UsableBytes of the data dir's file system (statfs;
//   -1 for a non-OS vfs or on other platforms).
//
// Version notes:
// * v1: ThrottleMillis semantics
// * v2: flexible
// * v3: ErrorCode
// * v4: TotalBytes, UsableBytes

func init() { regAPI(api{key: kmsg.DescribeLogDirs, min: 0, max: 4, handle: handleDescribeLogDirs}) }

func handleDescribeLogDirs(b *Broker, _ context.Context, _ *slot, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(logsDir(b.cfg.DataDir))
	dir.TotalBytes, dir.UsableBytes = diskUsage(b.cfg.FS, b.cfg.DataDir)

	add := func(t *topic, parts []int32) {
		st := kmsg.NewDescribeLogDirsResponseDirTopic()
		st.Topic = t.name
		for _, p := range parts {
			l, ok := t.partition(p)
			if !ok {
				continue
			}
			sp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			sp.Partition, sp.Size = p, l.Size()
			st.Partitions = append(st.Partitions, sp)
		}
		if len(st.Partitions) > 0 {
			dir.Topics = append(dir.Topics, st)
		}
	}
	if req.Topics == nil {
		for _, t := range b.topics.all() {
			ps := make([]int32, len(t.parts))
			for i := range ps {
				ps[i] = int32(i)
			}
			add(t, ps)
		}
	} else {
		for _, rt := range req.Topics {
			if t, ok := b.topics.get(rt.Topic); ok {
				add(t, rt.Partitions)
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}
