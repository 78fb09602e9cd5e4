package contentsqlite

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// zstdEncode compresses data (at zstd's fastest level, one goroutine:
// the store runs on the module's worker) and reports whether that made
// it smaller.
func (s *Store) zstdEncode(data []byte) ([]byte, bool) {
	if s.zenc == nil {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false))
		if err != nil {
			return nil, false
		}
		s.zenc = enc
	}
	z := s.zenc.EncodeAll(data, make([]byte, 0, len(data)/2))
	if len(z) >= len(data) {
		return nil, false
	}
	return z, true
}

// zstdDecode decompresses obj, which must come to size bytes (a damaged
// frame must not make it allocate more).
func (s *Store) zstdDecode(obj []byte, size int64) ([]byte, error) {
	if s.zdec == nil {
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<31))
		if err != nil {
			return nil, err
		}
		s.zdec = dec
	}
	if size < 0 || size > 1<<31 {
		return nil, fmt.Errorf("recorded size %d out of range", size)
	}
	data, err := s.zdec.DecodeAll(obj, make([]byte, 0, size))
	if err != nil {
		return nil, err
	}
	return data, nil
}
