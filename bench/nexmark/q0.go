package nexmark

import "github.com/weirhq/weir/stream"

// q0 is Nexmark's pass-through: every input record to the output topic
// unchanged. It measures what the stream library costs around a query:
// fetch, one operator, produce, commit. Its records are not decoded (the
// bytes codec), so the value written is byte for byte the value read,
// whatever it holds.
func q0(b *stream.Builder, in, out string, _ Options) error {
	stream.From(b, in, stream.Bytes(), stream.Bytes()).To(out, stream.Bytes(), stream.Bytes())
	return nil
}
