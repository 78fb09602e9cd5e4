package cli

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// flux fortune (flux-fortune(1)): a random saying about Flux, from a
// category. fluxgo's own texts.

var fortunes = map[string][]string{
	"valentines": {
		"Roses are red,\nqueues can be long;\nyour job will start soon,\nthe scheduler is strong.",
		"You are the core\nto my slot of one:\nallocated together,\nwe run till we're done.",
		"My heart is a TBON:\nevery message I send\nfinds its way home\nto rank 0 in the end.",
		"Be my jobspec,\nbe my R, be my shell;\nwith you every eventlog\nends in COMPLETED as well.",
	},
	"fun": {
		"A job with urgency 31 walks into a bar. It is served before everyone who was already there.",
		"There are 10 kinds of jobs: those that finish, and those that hit their time limit.",
		"The scheduler said no. Not now, not ever: unsatisfiable.",
		"Why did the broker go to therapy? Too many unresolved requests from its children.",
		"Never ask a job shell how its day went. It will tell you, line by line, on stdout.",
		"f58 is just base58 that went to finishing school.",
	},
	"facts": {
		"A Flux instance can run inside a Flux job: each level schedules only what its parent gave it.",
		"Job IDs are FLUIDs: a timestamp, a generator ID and a sequence number in 64 bits.",
		"The job manager keeps each job's history as an eventlog; a job's state is replayed from it.",
		"Brokers form a tree (the TBON): requests travel up toward rank 0, events fan out down.",
		"RFC 20 R lists a job's resources by rank: cores, GPUs, and a node list to match.",
		"flux jobs -a shows inactive jobs too; --since narrows them to a recent window.",
	},
	"art": {
		"   _____ _\n  |  ___| |_   ___  __\n  | |_  | | | | \\ \\/ /\n  |  _| | | |_| |>  <\n  |_|   |_|\\__,_/_/\\_\\\n",
		"      0\n     / \\\n    1   2\n   / \\ / \\\n  3  4 5  6   a TBON of 7 brokers\n",
		"  [job]--> depend --> priority --> sched --> run --> cleanup --> inactive\n",
	},
}

var fortuneCategories = []string{"all", "art", "facts", "fun", "valentines"}

func newFortuneCmd() *cobra.Command {
	var category string
	cmd := &cobra.Command{
		Use:   "fortune [-c CATEGORY]",
		Short: "Print a random Flux saying",
		Long: `Eeny, meeny, scheduler: print a random saying about Flux. --category
(-c) picks one category: ` + strings.Join(fortuneCategories, ", ") + ` (default all).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(fortuneCategories, category) {
				return usageError{fmt.Errorf("argument -c/--category: invalid choice: '%s' (choose from %s)", category, strings.Join(fortuneCategories, ", "))}
			}
			var pool []string
			for _, c := range fortuneCategories[1:] {
				if category == "all" || category == c {
					pool = append(pool, fortunes[c]...)
				}
			}
			if len(pool) == 0 {
				return errors.New("no fortunes")
			}
			text := pool[rand.IntN(len(pool))]
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n\n", strings.TrimRight(text, "\n"))
			return err
		},
	}
	cmd.Flags().StringVarP(&category, "category", "c", "all", "fortune `CATEGORY`: "+strings.Join(fortuneCategories, ", "))
	return cmd
}
