package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// hostlistOptions are the options of flux hostlist (flux-hostlist(1)).
type hostlistOptions struct {
	expand    bool   // -e: one host per delimiter instead of the compact form
	delimiter string // -d: delimiter for -e; "\n" in it means a newline
	count     bool   // -c: print the number of hosts
	nth       string // -n: idset of indices, or "-IDS" counting from the end
	find      string // -F: print the indices of these hosts
	limit     int    // -L: at most N hosts, -N for the last N; 0 for all
	sort      bool   // -S
	union     bool   // -u: sort and drop repeated hosts
	exclude   string // -x: hosts, or failing that an idset of indices
	intersect bool   // -i
	minus     bool   // -m
	xor       bool   // -X
	fallback  bool   // -f: a job ID that names no job is a hostname
	local     bool   // -l: default source "local"
	quiet     bool   // -q
}

// validate checks the combinations flux-hostlist(1) forbids.
func (o *hostlistOptions) validate() error {
	if o.expand && o.count {
		return errors.New("--expand and --count cannot be used together")
	}
	n := 0
	for _, set := range []bool{o.intersect, o.minus, o.xor} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("only one of --intersect, --minus and --xor may be given")
	}
	return nil
}

func newHostlistCmd() *cobra.Command {
	var o hostlistOptions
	cmd := &cobra.Command{
		Use:   "hostlist [OPTIONS] [SOURCES...]",
		Short: "Combine, manipulate and print RFC 29 hostlists",
		Long: `Concatenate the hostlists given as SOURCES into one and print it in
compact RFC 29 form, optionally combined by set operations, sorted,
filtered or expanded.

SOURCES may include:
  hosts        a literal hostlist ("node[1-4],login1")
  stdin, -     hostlists read from standard input, one or more per line
               separated by white space (the default with no SOURCE)
  instance     hosts from the broker 'hostlist' attribute
  JOBID        hosts assigned to a job (none while it is pending)
  local        hosts of the job in FLUX_JOB_ID if set, otherwise 'instance'
  avail[able]  'instance' minus the hosts that are down, drained or excluded
The last four need the enclosing Flux instance ($FLUX_URI). An argument that is a valid job ID is looked up as a job; --fallback
reads it as a hostname when no such job exists (e.g. hosts "f1", "foo3").`,
		SilenceUsage:          true,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "flux-hostlist: %v\n", err)
				return exitCode(2)
			}
			return runHostlist(o, args, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// An option error exits 2, as flux-hostlist(1) says.
		fmt.Fprintf(c.ErrOrStderr(), "flux-hostlist: %v\n", err)
		return exitCode(2)
	})
	f := cmd.Flags()
	f.SortFlags = false
	f.BoolVarP(&o.expand, "expand", "e", false, "expand the result using the delimiter")
	f.StringVarP(&o.delimiter, "delimiter", "d", " ", "delimiter for --expand (\\n for a newline)")
	f.BoolVarP(&o.count, "count", "c", false, "print the number of hosts instead of the hosts")
	f.StringVarP(&o.nth, "nth", "n", "", "output only the hosts at indices `[-]IDS` (-IDS counts from the end)")
	f.StringVarP(&o.find, "find", "F", "", "print the indices of `HOSTS` in the result; fail if one is missing")
	f.IntVarP(&o.limit, "limit", "L", 0, "output at most `N` hosts (-N for the last N)")
	f.BoolVarP(&o.sort, "sort", "S", false, "sort the result")
	f.BoolVarP(&o.union, "union", "u", false, "keep only unique hosts (implies --sort)")
	f.BoolVar(&o.union, "unique", false, "same as --union")
	f.StringVarP(&o.exclude, "exclude", "x", "", "drop all `HOSTS`, or the hosts at indices IDS, from the result")
	f.BoolVarP(&o.intersect, "intersect", "i", false, "return the intersection of all hostlists")
	f.BoolVarP(&o.minus, "minus", "m", false, "subtract all hostlists from the first")
	f.BoolVarP(&o.xor, "xor", "X", false, "return the symmetric difference of all hostlists")
	f.BoolVarP(&o.fallback, "fallback", "f", false, "treat job IDs that are not found as hostnames")
	f.BoolVarP(&o.local, "local", "l", false, "make the default source 'local' instead of stdin")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print nothing; exit 1 if the result is empty")
	_ = f.MarkHidden("unique")
	return cmd
}

// runHostlist computes the result of flux hostlist for sources and writes
// it to out. Steps happen in the order flux-core applies them: combine the
// sources, exclude, sort, uniq, limit, nth, then print.
func runHostlist(o hostlistOptions, sources []string, stdin io.Reader, out io.Writer) error {
	if len(sources) == 0 {
		sources = []string{"stdin"}
		if o.local {
			sources = []string{"local"}
		}
	}
	lists, err := resolveSources(sources, stdin, o.fallback)
	if err != nil {
		return err
	}

	var hl *hostlist.Hostlist
	switch {
	case o.intersect:
		hl = lists[0]
		for _, x := range lists[1:] {
			hl = hostsIntersect(hl, x)
		}
	case o.xor:
		hl = lists[0]
		for _, x := range lists[1:] {
			hl = hostsXor(hl, x)
		}
	case o.minus:
		hl = lists[0]
		for _, x := range lists[1:] {
			hl = hostsMinus(hl, x)
		}
	default:
		hl = hostlist.New()
		for _, x := range lists {
			hl.AppendList(x)
		}
	}

	if o.exclude != "" {
		if hl, err = excludeHosts(hl, o.exclude); err != nil {
			return err
		}
	}
	if o.sort {
		hl.Sort()
	}
	if o.union {
		hl.Uniq()
	}
	if o.limit > 0 && o.limit < hl.Len() {
		hl = hostlist.New(hl.Hosts()[:o.limit]...)
	} else if o.limit < 0 && -o.limit < hl.Len() {
		hl = hostlist.New(hl.Hosts()[hl.Len()+o.limit:]...)
	}
	if o.nth != "" {
		if hl, err = nthHosts(hl, o.nth); err != nil {
			return err
		}
	}

	if o.quiet {
		out = io.Discard
	}
	switch {
	case o.find != "":
		if err := findHosts(out, hl, o.find); err != nil {
			return err
		}
	case o.count:
		fmt.Fprintln(out, hl.Len())
	case o.expand:
		if hl.Len() > 0 {
			delim := strings.ReplaceAll(o.delimiter, `\n`, "\n")
			fmt.Fprintln(out, strings.Join(hl.Hosts(), delim))
		}
	default:
		if hl.Len() > 0 {
			fmt.Fprintln(out, hl.String())
		}
	}
	if o.quiet && hl.Len() == 0 {
		return exitCode(1)
	}
	return nil
}

// resolveSources returns one hostlist per source. Standard input is read
// once, however many times it is named. The instance, local, avail and
// job ID sources connect to the enclosing instance ($FLUX_URI) the first
// time one is needed.
func resolveSources(sources []string, stdin io.Reader, fallback bool) ([]*hostlist.Hostlist, error) {
	r := &hostlistResolver{fallback: fallback}
	defer r.close()
	var lists []*hostlist.Hostlist
	stdinRead := false
	for _, src := range sources {
		switch src {
		case "stdin", "-":
			hl := hostlist.New()
			if !stdinRead {
				stdinRead = true
				if err := waitStdin(stdin); err != nil {
					return nil, err
				}
				if err := readHostlists(stdin, hl); err != nil {
					return nil, err
				}
			}
			lists = append(lists, hl)
		case "instance":
			hl, err := r.instance()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			lists = append(lists, hl)
		case "local":
			hl, err := r.local()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			lists = append(lists, hl)
		case "avail", "available":
			hl, err := r.avail()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			lists = append(lists, hl)
		default:
			hl, err := r.literalOrJob(src)
			if err != nil {
				return nil, err
			}
			lists = append(lists, hl)
		}
	}
	return lists, nil
}

// hostlistResolver looks up the sources of flux hostlist that need the
// enclosing instance, with one connection for all of them.
type hostlistResolver struct {
	fallback bool
	h        *flux.Handle
	ctx      context.Context
	cancel   context.CancelFunc
}

func (r *hostlistResolver) handle() (*flux.Handle, error) {
	if r.h == nil {
		h, err := openHandle()
		if err != nil {
			return nil, err
		}
		r.h = h
		r.ctx, r.cancel = cmdContext()
	}
	return r.h, nil
}

func (r *hostlistResolver) close() {
	if r.h != nil {
		r.cancel()
		r.h.Close()
	}
}

// instance returns the hosts of the broker hostlist attribute, in rank
// order.
func (r *hostlistResolver) instance() (*hostlist.Hostlist, error) {
	h, err := r.handle()
	if err != nil {
		return nil, err
	}
	var resp struct {
		Value string `json:"value"`
	}
	if err := h.Call(r.ctx, "attr.get", flux.NodeidAny, map[string]string{"name": "hostlist"}, &resp); err != nil {
		return nil, fmt.Errorf("hostlist attribute: %s", flux.ErrorText(err))
	}
	hl, err := hostlist.Parse(resp.Value)
	if err != nil {
		return nil, fmt.Errorf("hostlist attribute: %w", err)
	}
	return hl, nil
}

// local returns the hosts of the job in FLUX_JOB_ID when this process
// runs in a job, else those of the instance.
func (r *hostlistResolver) local() (*hostlist.Hostlist, error) {
	if id := os.Getenv("FLUX_JOB_ID"); id != "" {
		jid, err := jobid.Parse(id)
		if err != nil {
			return nil, fmt.Errorf("FLUX_JOB_ID=%s is not a valid job ID", id)
		}
		return r.job(id, jid)
	}
	return r.instance()
}

// avail returns the instance's hosts whose ranks are neither offline,
// drained nor excluded (resource.status).
func (r *hostlistResolver) avail() (*hostlist.Hostlist, error) {
	all, err := r.instance()
	if err != nil {
		return nil, err
	}
	st, err := resource.GetStatus(r.ctx, r.h)
	if err != nil {
		return nil, fmt.Errorf("resource status: %s", flux.ErrorText(err))
	}
	ranks := st.R.Ranks().Difference(st.Offline).Difference(st.Exclude).Difference(st.Drained())
	hosts := all.Hosts()
	out := hostlist.New()
	for rank := range ranks.All() {
		if int(rank) < len(hosts) {
			out.Append(hosts[rank])
		}
	}
	return out, nil
}

// literalOrJob reads arg as a job ID when it is one (the job's nodes),
// else as a literal hostlist. A job ID that names no job is an error
// unless --fallback makes it a hostname.
func (r *hostlistResolver) literalOrJob(arg string) (*hostlist.Hostlist, error) {
	if id, err := jobid.Parse(arg); err == nil {
		hl, err := r.job(arg, id)
		if err == nil {
			return hl, nil
		}
		if !r.fallback || !errors.Is(err, syscall.ENOENT) {
			return nil, err
		}
	}
	return hostlist.Parse(arg) // its errors name arg
}

// jobNotFound is the error for a job ID that names no job: "job ARG not
// found", as flux-core words it, matching syscall.ENOENT.
type jobNotFound string

func (e jobNotFound) Error() string        { return "job " + string(e) + " not found" }
func (e jobNotFound) Is(target error) bool { return target == syscall.ENOENT }

// job returns the nodes of job id (arg as the user wrote it) from its R.
func (r *hostlistResolver) job(arg string, id jobid.ID) (*hostlist.Hostlist, error) {
	h, err := r.handle()
	if err != nil {
		if r.fallback {
			// No instance to ask: a hostname that looks like a job ID.
			return nil, fmt.Errorf("job %s: %w: %w", arg, err, syscall.ENOENT)
		}
		return nil, fmt.Errorf("job %s: %w", arg, err)
	}
	var resp struct {
		R string `json:"R"`
	}
	if err := h.Call(r.ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"R"}, "flags": 0}, &resp); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			// no R: a job not allocated yet has no hosts
			if h.Call(r.ctx, "job-info.lookup", flux.NodeidAny, map[string]any{"id": id, "keys": []string{"jobspec"}, "flags": 0}, nil) == nil {
				return hostlist.New(), nil
			}
			return nil, jobNotFound(arg)
		}
		return nil, fmt.Errorf("job %s: %s", arg, flux.ErrorText(err))
	}
	R, err := rset.Parse([]byte(resp.R))
	if err != nil {
		return nil, fmt.Errorf("job %s: R: %w", arg, err)
	}
	return R.Nodelist(), nil
}

// readHostlists appends to hl the hostlists in r, any number per line
// separated by white space.
func readHostlists(r io.Reader, hl *hostlist.Hostlist) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		for _, field := range strings.Fields(sc.Text()) {
			x, err := hostlist.Parse(field)
			if err != nil {
				return fmt.Errorf("stdin line %d: %w", line, err)
			}
			hl.AppendList(x)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	return nil
}

// hostSet returns the distinct hosts of hl.
func hostSet(hl *hostlist.Hostlist) map[string]bool {
	m := make(map[string]bool, hl.Len())
	for h := range hl.All() {
		m[h] = true
	}
	return m
}

// hostsIntersect returns the hosts of a that are also in b, sorted and
// without repeats.
func hostsIntersect(a, b *hostlist.Hostlist) *hostlist.Hostlist {
	in := hostSet(b)
	out := hostlist.New()
	for h := range a.All() {
		if in[h] {
			out.Append(h)
		}
	}
	out.Uniq()
	return out
}

// hostsXor returns the hosts in a or b but not in both, sorted and
// without repeats.
func hostsXor(a, b *hostlist.Hostlist) *hostlist.Hostlist {
	inA, inB := hostSet(a), hostSet(b)
	out := hostlist.New()
	for h := range a.All() {
		if !inB[h] {
			out.Append(h)
		}
	}
	for h := range b.All() {
		if !inA[h] {
			out.Append(h)
		}
	}
	out.Uniq()
	return out
}

// hostsMinus returns a less one occurrence of each host of b, earliest
// first, as flux-core deletes hosts; order is kept.
func hostsMinus(a, b *hostlist.Hostlist) *hostlist.Hostlist {
	drop := make(map[string]int, b.Len())
	for h := range b.All() {
		drop[h]++
	}
	out := hostlist.New()
	for h := range a.All() {
		if drop[h] > 0 {
			drop[h]--
			continue
		}
		out.Append(h)
	}
	return out
}

// excludeHosts drops every occurrence of the hosts in arg from hl. When
// that drops nothing and arg is an idset, it drops the hosts at those
// indices instead; indices past the end are ignored.
func excludeHosts(hl *hostlist.Hostlist, arg string) (*hostlist.Hostlist, error) {
	ex, err := hostlist.Parse(arg)
	if err != nil {
		return nil, fmt.Errorf("--exclude: %w", err)
	}
	drop := hostSet(ex)
	out := hostlist.New()
	for h := range hl.All() {
		if !drop[h] {
			out.Append(h)
		}
	}
	if out.Len() < hl.Len() {
		return out, nil
	}
	ids, err := idset.Parse(arg)
	if err != nil {
		return hl, nil
	}
	out = hostlist.New()
	i := uint(0)
	for h := range hl.All() {
		if !ids.Contains(i) {
			out.Append(h)
		}
		i++
	}
	return out, nil
}

// nthHosts returns the hosts of hl at the indices of the idset arg, or
// with a leading '-', at those positions counted from the end (-1 is the
// last host). The result keeps the order of hl. Every index must exist.
func nthHosts(hl *hostlist.Hostlist, arg string) (*hostlist.Hostlist, error) {
	fromEnd := strings.HasPrefix(arg, "-")
	ids, err := idset.Parse(strings.TrimPrefix(arg, "-"))
	if err != nil {
		return nil, fmt.Errorf("--nth: %w", err)
	}
	n := uint(hl.Len())
	var idx []uint
	if fromEnd {
		if ids.Contains(0) {
			return nil, fmt.Errorf("--nth: index -0 is not valid: -1 is the last host")
		}
		if last, ok := ids.Last(); ok && last > n {
			return nil, fmt.Errorf("--nth: index -%d is out of range for %d hosts", last, n)
		}
		// Descending distances from the end are ascending indices.
		rs := ids.Ranges()
		for k := len(rs) - 1; k >= 0; k-- {
			for d := rs[k].Hi; ; d-- {
				idx = append(idx, n-d)
				if d == rs[k].Lo {
					break
				}
			}
		}
	} else {
		if last, ok := ids.Last(); ok && last >= n {
			return nil, fmt.Errorf("--nth: index %d is out of range for %d hosts", last, n)
		}
		idx = make([]uint, 0, ids.Count())
		for i := range ids.All() {
			idx = append(idx, i)
		}
	}
	out := hostlist.New()
	for _, i := range idx {
		h, err := hl.Nth(int(i))
		if err != nil {
			return nil, fmt.Errorf("--nth: %w", err)
		}
		out.Append(h)
	}
	return out, nil
}

// findHosts writes the index in hl of each host of arg, space separated.
func findHosts(out io.Writer, hl *hostlist.Hostlist, arg string) error {
	want, err := hostlist.Parse(arg)
	if err != nil {
		return fmt.Errorf("--find: %w", err)
	}
	first := make(map[string]int, hl.Len())
	i := 0
	for h := range hl.All() {
		if _, seen := first[h]; !seen {
			first[h] = i
		}
		i++
	}
	idx := make([]string, 0, want.Len())
	for h := range want.All() {
		k, ok := first[h]
		if !ok {
			return fmt.Errorf("--find: host %s is not in the hostlist", h)
		}
		idx = append(idx, fmt.Sprint(k))
	}
	fmt.Fprintln(out, strings.Join(idx, " "))
	return nil
}

// waitStdin waits until a file stdin has input (or EOF), for at most
// $FLUX_HOSTLIST_STDIN_TIMEOUT seconds (default 15), as flux-core's
// flux hostlist does: a forgotten pipe is an error, not a hang.
func waitStdin(stdin io.Reader) error {
	f, ok := stdin.(*os.File)
	if !ok {
		return nil
	}
	timeout := 15.0
	if v := os.Getenv("FLUX_HOSTLIST_STDIN_TIMEOUT"); v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || t < 0 || t > 1e6 {
			return fmt.Errorf("FLUX_HOSTLIST_STDIN_TIMEOUT=%s: want seconds", v)
		}
		timeout = t
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	deadline := time.Now().Add(time.Duration(timeout * float64(time.Second)))
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms < 0 {
			ms = 0
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil // not pollable (a regular file): just read it
		}
		if n > 0 {
			return nil
		}
		return fmt.Errorf("timeout after %gs waiting for stdin", timeout)
	}
}
