package cli

// flux jobs -R, --recursive: after the listing, each listed job that
// runs a Flux instance (it is running and has published its URI, see
// uri_resolve.go) is listed in turn, under a heading with its jobid path
// ("ƒA:", "ƒA/ƒB:" ...), down to -L levels. Only the user's own
// instances are entered unless --recurse-all: instances normally admit
// only their owner.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// jobsRecursion holds the recursion options and where a listing is.
type jobsRecursion struct {
	on, all  bool
	level    int
	levelSet bool
	threads  int
	depth    int    // levels below the instance flux jobs was run in
	path     string // jobid path of the instance being listed, with a trailing "/"
}

func addRecursionFlags(f *pflag.FlagSet, r *jobsRecursion) {
	f.BoolVarP(&r.on, "recursive", "R", false, "List jobs recursively")
	f.BoolVar(&r.all, "recurse-all", false, "With -R, also recurse into other users' instances (implies --recursive)")
	f.IntVarP(&r.level, "level", "L", 0, "With -R, stop recursive listing at level `N` (0: no recursion)")
	f.IntVar(&r.threads, "threads", 0, "Accepted for compatibility (instances are listed one after another)")
}

// enabled reports whether the listing should descend one more level.
func (r *jobsRecursion) enabled() bool {
	if !r.on && !r.all {
		return false
	}
	return !r.levelSet || r.depth < r.level
}

// attrs adds the job-list attributes recursion needs.
func (r *jobsRecursion) attrs(attrs []string) []string {
	if !r.enabled() {
		return attrs
	}
	for _, need := range []string{"annotations", "state", "userid"} {
		found := false
		for _, a := range attrs {
			if a == need || a == job.AttrAll {
				found = true
			}
		}
		if !found {
			attrs = append(attrs, need)
		}
	}
	return attrs
}

// instanceURI returns the URI a running job published as an instance,
// or "".
func instanceURI(j *job.Info) string {
	if j.State&job.StateRunning == 0 || len(j.Annotations) == 0 {
		return ""
	}
	var a struct {
		User struct {
			URI string `json:"uri"`
		} `json:"user"`
	}
	if json.Unmarshal(j.Annotations, &a) != nil {
		return ""
	}
	return a.User.URI
}

// recurseJobs lists the jobs of every instance among rows.
func recurseJobs(ctx context.Context, o jobsOptions, rows []jobRow, out, errw io.Writer) error {
	if !o.recurse.enabled() {
		return nil
	}
	me := uint32(os.Getuid())
	for _, r := range rows {
		uri := instanceURI(r.Info)
		if uri == "" || (!o.recurse.all && r.Userid != me) {
			continue
		}
		path := o.recurse.path + r.ID.String()
		local, err := localURI(uri)
		if err != nil {
			fmt.Fprintf(errw, "flux-jobs: %s: %v\n", path, err)
			continue
		}
		h, err := flux.Open(local)
		if err != nil {
			fmt.Fprintf(errw, "flux-jobs: %s: %v\n", path, err)
			continue
		}
		fmt.Fprintf(out, "\n%s:\n", path)
		sub := o
		sub.ids = nil
		sub.recurse.depth++
		sub.recurse.path = path + "/"
		err = runJobs(ctx, h, sub, out, errw)
		h.Close()
		if err != nil {
			fmt.Fprintf(errw, "flux-jobs: %s: %v\n", path, err)
		}
	}
	return nil
}
