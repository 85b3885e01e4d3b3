package txn

import wlog "github.com/weirhq/weir/broker/log"

// WrapLog adapts the storage engine's log of StateTopic's partition to
// StateLog.
func WrapLog(l *wlog.Log) StateLog { return logState{l} }

type logState struct{ l *wlog.Log }

func (s logState) Append(batches []byte, durable bool) (int64, error) {
	res, err := s.l.Append(batches, durable)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

func (s logState) Read(offset int64, maxBytes int, upTo int64) ([]byte, func(), error) {
	res, err := s.l.Read(offset, maxBytes, upTo)
	if err != nil {
		if res.Release != nil {
			res.Release()
		}
		return nil, nil, err
	}
	return res.Data, res.Release, nil
}

func (s logState) HighWatermark() int64  { return s.l.HighWatermark() }
func (s logState) LogStartOffset() int64 { return s.l.LogStartOffset() }
