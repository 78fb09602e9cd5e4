package cli

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Set operations on R named as the issue asks for them: union is the
// union of possibly overlapping sets (append refuses overlaps).
func rUnion(rs []*rset.R) (*rset.R, error) {
	acc := rs[0]
	for _, r := range rs[1:] {
		acc = acc.Union(r)
	}
	return acc, nil
}

// newRInfoCmd prints a human summary of the R objects on stdin: counts,
// nodelist, the short form, properties, and the time window.
func newRInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "info",
		Short: "Summarize R objects: nodes, cores, GPUs, hosts, properties and times",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := readUnion(cmd.InOrStdin())
			if err != nil {
				return rFail(cmd.ErrOrStderr(), err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%d nodes, %d cores, %d gpus\n", r.NNodes(), r.NCores(), r.NGPUs())
			fmt.Fprintf(w, "ranks:     %s\n", r.Ranks().String())
			if r.HasHostnames() {
				fmt.Fprintf(w, "nodelist:  %s\n", r.Nodelist().String())
			}
			fmt.Fprintf(w, "resources: %s\n", r.String())
			props := r.Properties()
			if len(props) > 0 {
				names := make([]string, 0, len(props))
				for n, ranks := range props {
					names = append(names, n+":"+ranks.String())
				}
				sort.Strings(names)
				fmt.Fprintf(w, "properties: %s\n", strings.Join(names, " "))
			}
			if st := r.StartTime(); st > 0 {
				fmt.Fprintf(w, "starttime:  %s\n", time.Unix(0, int64(st*1e9)).UTC().Format(time.RFC3339))
			}
			if ex := r.Expiration(); ex > 0 {
				fmt.Fprintf(w, "expiration: %s\n", time.Unix(0, int64(ex*1e9)).UTC().Format(time.RFC3339))
			}
			return nil
		},
	}
}
