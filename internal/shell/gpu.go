package shell

import (
	"fmt"
	"strconv"
	"strings"
)

// GPUAffinity reads the gpu-affinity shell option: "on" (every task
// sees all of the node's GPUs of the job, the default), "per-task" (the
// GPUs are divided among the tasks) or "off" (CUDA_VISIBLE_DEVICES is
// left as the job's environment has it).
func GPUAffinity(v any) (string, error) {
	switch v {
	case nil:
		return "on", nil
	case "on", "off", "per-task":
		return v.(string), nil
	}
	return "", fmt.Errorf("%w: gpu-affinity=%v: want on, off or per-task", ErrBadOption, v)
}

// GPUsFor returns the GPUs of local task i of n on shell index idx:
// all of them, or with perTask a share of its own (at least one).
func (p *Plan) GPUsFor(idx, i, n int, perTask bool) []uint {
	var all []uint
	for id := range p.GPUs[idx].All() {
		all = append(all, id)
	}
	if !perTask || n <= 1 || len(all) == 0 {
		return all
	}
	lo, hi := i*len(all)/n, (i+1)*len(all)/n
	if hi <= lo {
		lo, hi = lo%len(all), lo%len(all)+1
	}
	return all[lo:hi]
}

// CUDAVisibleDevices formats GPU ids as CUDA_VISIBLE_DEVICES wants them.
func CUDAVisibleDevices(ids []uint) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}
