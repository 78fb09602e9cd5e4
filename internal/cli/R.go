package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// flux R: read, generate and combine RFC 20 resource sets. Every
// subcommand but encode reads one or more R objects, one after the other,
// on standard input. Errors are printed as "flux-R: ..." and exit 1.

const rProg = "flux-R"

// rFail prints err the way flux R reports errors and returns the exit
// status error.
func rFail(stderr io.Writer, err error) error {
	fmt.Fprintf(stderr, "%s: %v\n", rProg, err)
	return exitCode(1)
}

// rRun adapts a flux R subcommand body to cobra.
func rRun(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			var ee exitError
			if errors.As(err, &ee) {
				return err
			}
			return rFail(cmd.ErrOrStderr(), err)
		}
		return nil
	}
}

func newRCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "R",
		Short: "Read, generate and process RFC 20 resource set objects",
		Long: `Read, generate and process RFC 20 resource set (R) objects.

Except for encode, the subcommands read one or more R objects, one after
the other, on standard input.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return rFail(cmd.ErrOrStderr(), fmt.Errorf("unknown subcommand %q", args[0]))
			}
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Usage()
			return exitCode(1)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return rFail(c.ErrOrStderr(), err)
	})
	cmd.AddCommand(
		newREncodeCmd(),
		newRTransformCmd("append", "Append R objects, which must be disjoint",
			"Append the R objects on stdin. It is an error if any two share a resource.", rAppend),
		newRTransformCmd("diff", "Set difference of R objects: (R1 - R2) - R3 ...",
			"Return the set difference of the R objects on stdin: (R1 - R2) - R3 ...", rDiff),
		newRTransformCmd("intersect", "Intersection of R objects",
			"Return the intersection of all R objects on stdin.", rIntersect),
		newRTransformCmd("remap", "Union of R objects with ranks renumbered from 0",
			"Return the union of all R objects on stdin with ranks renumbered starting from 0.", rRemap),
		newRTransformCmd("union", "Union of R objects (they may overlap)",
			"Return the union of all R objects on stdin; unlike append, overlaps are allowed.", rUnion),
		newRRerankCmd(),
		newRDecodeCmd(),
		newRInfoCmd(),
		newRVerifyCmd(),
		newRSetPropertyCmd(),
	)
	return cmd
}

// readRs reads the R objects on in.
func readRs(in io.Reader) ([]*rset.R, error) {
	rs, err := rset.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("failed to read R on stdin: %w", err)
	}
	return rs, nil
}

// readUnion reads the R objects on in and returns their union.
func readUnion(in io.Reader) (*rset.R, error) {
	rs, err := readRs(in)
	if err != nil {
		return nil, err
	}
	acc := rs[0]
	for _, r := range rs[1:] {
		acc = acc.Union(r)
	}
	return acc, nil
}

func writeR(w io.Writer, r *rset.R) error {
	_, err := w.Write(append(r.Encode(), '\n'))
	return err
}

// rEncodeOptions are the options of flux R encode; the has* fields say
// whether the option was given.
type rEncodeOptions struct {
	ranks, cores, gpus, hosts string
	hasRanks, hasHosts        bool
	properties                []string
}

func newREncodeCmd() *cobra.Command {
	var o rEncodeOptions
	cmd := &cobra.Command{
		Use:   "encode [OPTIONS]",
		Short: "Encode an R object for testing",
		Long: `Encode an R object with the given ranks, cores, GPUs and hosts.

Without --ranks, there is one rank per host of --hosts, or the single
rank 0. Without --hosts, every rank is named after the local host. Without
--cores and --gpus, every rank has core 0.`,
		Args: cobra.NoArgs,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			o.hasRanks = cmd.Flags().Changed("ranks")
			o.hasHosts = cmd.Flags().Changed("hosts")
			host, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("gethostname: %w", err)
			}
			return rEncode(o, host, cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&o.ranks, "ranks", "r", "", "Generate an R with ranks in `IDSET`")
	f.StringVarP(&o.cores, "cores", "c", "", "Assign cores with `IDS` to each rank (default: core 0)")
	f.StringVarP(&o.gpus, "gpus", "g", "", "Assign GPUs with `IDS` to each rank (default: none)")
	f.StringVarP(&o.hosts, "hosts", "H", "", "Set the nodelist to `HOSTS` (default: the local hostname for every rank)")
	f.StringArrayVarP(&o.properties, "property", "p", nil,
		"Assign property NAME to RANKS, or to all ranks without :RANKS (`NAME[:RANKS]`, repeatable)")
	return cmd
}

// rEncode writes the R object described by o; localhost names the ranks
// when o has no hosts.
func rEncode(o rEncodeOptions, localhost string, w io.Writer) error {
	cores, gpus := o.cores, o.gpus
	if cores == "" && gpus == "" {
		cores = "0"
	}
	coreIDs, err := idset.Parse(cores)
	if err != nil {
		return fmt.Errorf("invalid --cores %q: %w", cores, err)
	}
	gpuIDs, err := idset.Parse(gpus)
	if err != nil {
		return fmt.Errorf("invalid --gpus %q: %w", gpus, err)
	}
	var hosts *hostlist.Hostlist
	if o.hasHosts {
		if hosts, err = hostlist.Parse(o.hosts); err != nil {
			return fmt.Errorf("invalid --hosts %q: %w", o.hosts, err)
		}
	}
	var ranks idset.Set
	switch {
	case o.hasRanks:
		if ranks, err = idset.Parse(o.ranks); err != nil {
			return fmt.Errorf("invalid --ranks %q: %w", o.ranks, err)
		}
	case hosts != nil:
		if hosts.Len() > 0 {
			ranks = idset.Range(0, uint(hosts.Len()-1))
		}
	default:
		ranks = idset.New(0)
	}
	if hosts == nil {
		local := make([]string, ranks.Count())
		for i := range local {
			local[i] = localhost
		}
		hosts = hostlist.New(local...)
	} else if hosts.Len() != ranks.Count() {
		return fmt.Errorf("hostname count in %q (%d) does not match the number of ranks (%d)",
			o.hosts, hosts.Len(), ranks.Count())
	}
	r, err := rset.NewNodes(ranks, hosts, coreIDs, gpuIDs)
	if err != nil {
		return err
	}
	if err := setProperties(r, o.properties); err != nil {
		return err
	}
	return writeR(w, r)
}

// setProperties applies NAME[:RANKS] arguments to r.
func setProperties(r *rset.R, args []string) error {
	for _, arg := range args {
		name, spec, found := strings.Cut(arg, ":")
		ranks := r.Ranks()
		if found {
			var err error
			if ranks, err = idset.Parse(spec); err != nil {
				return fmt.Errorf("property %s: invalid ranks %q: %w", name, spec, err)
			}
		}
		if err := r.SetProperty(name, ranks); err != nil {
			return fmt.Errorf("failed to assign properties: %w", err)
		}
	}
	return nil
}

// newRTransformCmd makes a subcommand that reads R objects and writes
// one result.
func newRTransformCmd(name, short, long string, fn func([]*rset.R) (*rset.R, error)) *cobra.Command {
	return &cobra.Command{
		Use:   name,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			rs, err := readRs(cmd.InOrStdin())
			if err != nil {
				return err
			}
			r, err := fn(rs)
			if err != nil {
				return err
			}
			return writeR(cmd.OutOrStdout(), r)
		}),
	}
}

func rAppend(rs []*rset.R) (*rset.R, error) {
	acc := rs[0]
	for _, r := range rs[1:] {
		var err error
		if acc, err = acc.Append(r); err != nil {
			return nil, err
		}
	}
	return acc, nil
}

// fold applies op left to right over at least two sets.
func fold(name string, rs []*rset.R, op func(a, b *rset.R) *rset.R) (*rset.R, error) {
	if len(rs) < 2 {
		return nil, fmt.Errorf("%s requires at least 2 resource sets", name)
	}
	acc := rs[0]
	for _, r := range rs[1:] {
		acc = op(acc, r)
	}
	return acc, nil
}

func rDiff(rs []*rset.R) (*rset.R, error) {
	return fold("diff", rs, (*rset.R).Difference)
}

func rIntersect(rs []*rset.R) (*rset.R, error) {
	return fold("intersect", rs, (*rset.R).Intersect)
}

func rRemap(rs []*rset.R) (*rset.R, error) {
	acc := rs[0]
	for _, r := range rs[1:] {
		acc = acc.Union(r)
	}
	return acc.Remap(), nil
}

func newRRerankCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rerank HOSTLIST",
		Short: "Union of R objects with ranks renumbered by position in HOSTLIST",
		Long: `Return the union of all R objects on stdin with each node's rank set to
the index of its hostname in HOSTLIST.`,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("rerank requires one HOSTLIST argument")
			}
			return rRerank(cmd.InOrStdin(), args[0], cmd.OutOrStdout())
		}),
	}
}

func rRerank(in io.Reader, hosts string, w io.Writer) error {
	hl, err := hostlist.Parse(hosts)
	if err != nil {
		return fmt.Errorf("invalid hostlist %q: %w", hosts, err)
	}
	r, err := readUnion(in)
	if err != nil {
		return err
	}
	out, err := r.Rerank(hl)
	if err != nil {
		return err
	}
	return writeR(w, out)
}

// rDecodeOptions are the options of flux R decode.
type rDecodeOptions struct {
	short, nodelist, ranks bool
	count                  string
	include, exclude       string
	properties             string
}

func newRDecodeCmd() *cobra.Command {
	var o rDecodeOptions
	cmd := &cobra.Command{
		Use:   "decode [OPTIONS]",
		Short: "Print the union of R objects, or facts about it",
		Long: `Return the union of all R objects on stdin and print details or a
summary of the result. Without options the union is printed as an R
object; with options, each one asked for prints one line, in the order
--short, --nodelist, --ranks, --count.`,
		Args: cobra.NoArgs,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			return rDecode(cmd.InOrStdin(), o, cmd.OutOrStdout())
		}),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.short, "short", "s", false, "Print the short form of R")
	f.BoolVarP(&o.nodelist, "nodelist", "n", false, "Print the nodelist in hostlist form")
	f.BoolVarP(&o.ranks, "ranks", "r", false, "Print the ranks in idset form")
	f.StringVarP(&o.count, "count", "c", "", "Print the count of resource `TYPE` (node, core, gpu)")
	f.StringVarP(&o.include, "include", "i", "", "Include only the given `RANKS`")
	f.StringVarP(&o.exclude, "exclude", "x", "", "Exclude the given `RANKS`")
	f.StringVarP(&o.properties, "properties", "p", "",
		"Keep only ranks with all of the properties in `LIST` (comma separated; ^NAME for ranks without NAME)")
	return cmd
}

func rDecode(in io.Reader, o rDecodeOptions, w io.Writer) error {
	r, err := readUnion(in)
	if err != nil {
		return err
	}
	if o.properties != "" {
		ranks, err := propertyFilter(r, o.properties)
		if err != nil {
			return err
		}
		r = r.CopyRanks(ranks)
	}
	if o.include != "" {
		ranks, err := idset.Parse(o.include)
		if err != nil {
			return fmt.Errorf("invalid --include %q: %w", o.include, err)
		}
		r = r.CopyRanks(ranks)
	}
	if o.exclude != "" {
		ranks, err := idset.Parse(o.exclude)
		if err != nil {
			return fmt.Errorf("invalid --exclude %q: %w", o.exclude, err)
		}
		r = r.ExcludeRanks(ranks)
	}
	var lines []string
	if o.short {
		lines = append(lines, r.String())
	}
	if o.nodelist {
		lines = append(lines, r.Nodelist().String())
	}
	if o.ranks {
		lines = append(lines, r.Ranks().String())
	}
	if o.count != "" {
		var n int
		switch o.count {
		case "node", "nodes", "rank", "ranks":
			n = r.NNodes()
		case "core", "cores":
			n = r.NCores()
		case "gpu", "gpus":
			n = r.NGPUs()
		default:
			return fmt.Errorf("unknown resource type %q for --count (use node, core or gpu)", o.count)
		}
		lines = append(lines, fmt.Sprint(n))
	}
	if len(lines) == 0 {
		return writeR(w, r)
	}
	_, err = io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// propertyFilter returns the ranks of r that have every property of the
// comma-separated list, where ^NAME asks for ranks without NAME.
func propertyFilter(r *rset.R, list string) (idset.Set, error) {
	ranks := r.Ranks()
	for _, p := range strings.Split(list, ",") {
		name, negate := strings.CutPrefix(p, "^")
		if err := rset.CheckPropertyName(name); err != nil {
			return idset.Set{}, fmt.Errorf("invalid --properties %q: %w", list, err)
		}
		if negate {
			ranks = ranks.Difference(r.PropertyRanks(name))
		} else {
			ranks = ranks.Intersect(r.PropertyRanks(name))
		}
	}
	return ranks, nil
}

func newRVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Verify that R2 has at least the resources R1 has on R2's ranks",
		Long: `Read two R objects on stdin, the expected R1 and the actual R2, and check
that every rank of R2 is in R1 with the same hostname and at least the
cores and GPUs R1 gives it. Extra resources in R2 are reported but are not
an error.`,
		Args: cobra.NoArgs,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			return rVerify(cmd.InOrStdin(), cmd.ErrOrStderr())
		}),
	}
}

func rVerify(in io.Reader, stderr io.Writer) error {
	rs, err := readRs(in)
	if err != nil {
		return err
	}
	if len(rs) != 2 {
		return fmt.Errorf("verify requires exactly 2 R objects on stdin, got %d", len(rs))
	}
	extra, err := rset.Verify(rs[0], rs[1])
	if err != nil {
		return err
	}
	if !extra.Empty() {
		fmt.Fprintf(stderr, "%s: extra resources: %s\n", rProg, extra)
	}
	return nil
}

func newRSetPropertyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "set-property PROPERTY[:RANKS]...",
		Short: "Set properties on the union of R objects",
		Long: `Set properties on the union of the R objects on stdin and print the
result. A PROPERTY without :RANKS applies to all ranks.`,
		RunE: rRun(func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("set-property requires at least one PROPERTY[:RANKS] argument")
			}
			r, err := readUnion(cmd.InOrStdin())
			if err != nil {
				return err
			}
			if err := setProperties(r, args); err != nil {
				return err
			}
			return writeR(cmd.OutOrStdout(), r)
		}),
	}
}
