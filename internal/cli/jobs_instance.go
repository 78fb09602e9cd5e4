package cli

// The flux jobs fields of jobs that run a Flux instance: instance.stats,
// instance.utilization, instance.resources.<state>.<count> ... are asked
// of the instance itself (job-list.job-stats and the scheduler's view of
// its resources), as flux-core's flux jobs does; uri and uri.local come
// from the URI the instance published. For other jobs, and instances
// that cannot be reached (another user's, say), they are empty.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
)

// instanceTimeout bounds the questions put to one instance.
const instanceTimeout = 5 * time.Second

// instanceInfo is what a running instance says of itself.
type instanceInfo struct {
	pending, running, successful, failed int
	inactive, total                      int
	res                                  *resource.SchedStatus
}

// instanceHeadings are flux-core's headings of the instance fields.
var instanceHeadings = map[string]string{
	"uri": "URI", "uri.local": "URI",
	"instance.stats.total": "NJOBS", "instance.utilization": "CORE%",
	"instance.gpu_utilization": "GPU%", "instance.progress": "PROG",
}

// instanceCounts maps the last member of instance.resources.STATE.COUNT
// to its heading.
var instanceCounts = map[string]string{"ncores": "CORES", "ngpus": "GPUS", "nnodes": "NODES"}

// instanceStates maps the STATE of instance.resources.STATE.COUNT to its
// heading (that of "all" is the count's).
var instanceStates = map[string]string{"all": "", "up": "UP", "down": "DOWN", "allocated": "USED", "free": "FREE"}

// isInstanceField reports whether name is one of the fields above.
func isInstanceField(name string) bool {
	return name == "uri" || name == "uri.local" || strings.HasPrefix(name, "instance.")
}

// instanceHeading returns the heading of an instance field.
func instanceHeading(name string) string {
	if h, ok := instanceHeadings[name]; ok {
		return h
	}
	if st, count, ok := resourceField(name); ok {
		if h := instanceStates[st]; h != "" {
			return h
		}
		return instanceCounts[count]
	}
	return strings.ToUpper(strings.TrimPrefix(name, "instance."))
}

// resourceField splits instance.resources.STATE.COUNT.
func resourceField(name string) (state, count string, ok bool) {
	rest, ok := strings.CutPrefix(name, "instance.resources.")
	if !ok {
		return "", "", false
	}
	state, count, ok = strings.Cut(rest, ".")
	if _, known := instanceStates[state]; !ok || !known {
		return "", "", false
	}
	if _, known := instanceCounts[count]; !known {
		return "", "", false
	}
	return state, count, true
}

// instanceField returns the getter of an instance field.
func instanceField(name string) (func(jobRow) fmtVal, error) {
	with := func(get func(*instanceInfo) fmtVal) func(jobRow) fmtVal {
		return func(r jobRow) fmtVal {
			if r.inst == nil {
				return vEmpty()
			}
			return get(r.inst)
		}
	}
	switch name {
	case "uri":
		return func(r jobRow) fmtVal { return vStr(instanceURI(r.Info)) }, nil
	case "uri.local":
		return func(r jobRow) fmtVal {
			uri := instanceURI(r.Info)
			if uri == "" {
				return vEmpty()
			}
			local, err := localURI(uri)
			if err != nil {
				return vEmpty()
			}
			return vStr(local)
		}, nil
	case "instance.stats":
		return with(func(in *instanceInfo) fmtVal {
			return vStr(fmt.Sprintf("PD:%d R:%d CD:%d F:%d", in.pending, in.running, in.successful, in.failed))
		}), nil
	case "instance.stats.total":
		return with(func(in *instanceInfo) fmtVal { return vInt(int64(in.total)) }), nil
	case "instance.progress":
		return with(func(in *instanceInfo) fmtVal {
			if in.total == 0 {
				return vFloat(0)
			}
			return vFloat(float64(in.inactive) / float64(in.total))
		}), nil
	case "instance.utilization", "instance.gpu_utilization":
		gpus := name == "instance.gpu_utilization"
		return with(func(in *instanceInfo) fmtVal {
			if in.res == nil {
				return vEmpty()
			}
			all, used := in.res.All.NCores(), in.res.Allocated.NCores()
			if gpus {
				all, used = in.res.All.NGPUs(), in.res.Allocated.NGPUs()
			}
			if all == 0 {
				return vFloat(0)
			}
			return vFloat(float64(used) / float64(all))
		}), nil
	}
	if state, count, ok := resourceField(name); ok {
		return with(func(in *instanceInfo) fmtVal {
			if in.res == nil {
				return vEmpty()
			}
			set, err := in.res.State(state)
			if err != nil {
				return vEmpty()
			}
			switch count {
			case "ncores":
				return vInt(int64(set.NCores()))
			case "ngpus":
				return vInt(int64(set.NGPUs()))
			}
			return vInt(int64(set.Ranks().Count()))
		}), nil
	}
	return nil, fmt.Errorf("Unknown format field: %s", name)
}

// needsInstances reports whether a format shows what only an instance
// itself can say.
func needsInstances(fields []fmtField) bool {
	for _, f := range fields {
		if strings.HasPrefix(f.name, "instance.") {
			return true
		}
	}
	return false
}

// fetchInstances asks each row's instance, if it runs one, for its
// statistics and resources. An instance that does not answer leaves its
// row's instance fields empty.
func fetchInstances(ctx context.Context, rows []jobRow) {
	for i := range rows {
		uri := instanceURI(rows[i].Info)
		if uri == "" {
			continue
		}
		local, err := localURI(uri)
		if err != nil {
			continue
		}
		rows[i].inst = askInstance(ctx, local)
	}
}

// askInstance connects to the instance at uri and asks it; nil if it
// cannot be reached or does not answer.
func askInstance(ctx context.Context, uri string) *instanceInfo {
	ctx, cancel := context.WithTimeout(ctx, instanceTimeout)
	defer cancel()
	h, err := flux.Open(uri)
	if err != nil {
		return nil
	}
	defer h.Close()
	st, err := getJobStats(ctx, h)
	if err != nil {
		return nil
	}
	in := &instanceInfo{
		pending:    st.pending(),
		running:    st.running(),
		successful: st.Successful,
		failed:     st.failed(),
		inactive:   st.JobStates["inactive"],
		total:      st.JobStates["total"],
	}
	if res, err := resource.GetSchedStatus(ctx, h); err == nil {
		in.res = res
	}
	return in
}
