package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// flux job id [--to=ENC] [--from=ENC] [ID...]: convert job IDs between
// encodings. With no ID arguments, IDs are read from standard input, one
// per line.

// jobIDOptions are the inputs of flux job id besides the IDs.
type jobIDOptions struct {
	to   string // output encoding (default dec)
	from string // input encoding; "" or "any" detects it
	// asciiF58 writes f58 with the ASCII "f" prefix, as Flux does when
	// FLUX_F58_FORCE_ASCII is set.
	asciiF58 bool
}

// jobIDAny is the --from value that detects the encoding of each ID.
const jobIDAny = "any"

func newJobIDCmd() *cobra.Command {
	var opts jobIDOptions
	cmd := &cobra.Command{
		Use:   "id [--to=ENCODING] [--from=ENCODING] [ID...]",
		Short: "Convert job IDs between encodings",
		Long: `Convert job IDs to another encoding, one output line per ID.

IDs are taken from the command line or, if there are none, from standard
input, one per line. Each may be in any encoding: dec (6731191091817518),
hex (0x17e9fb8df16c2e), dothex (0017.e9fb.8df1.6c2e), kvs
(job.0017.e9fb.8df1.6c2e), words (reform-remote-galileo--heart-package-academy),
f58 (ƒuZZybuNNy or fuZZybuNNy), f58plain, or emoji.

If FLUX_F58_FORCE_ASCII is set, f58 output uses the ASCII "f" prefix.`,
		RunE: jobRun(func(cmd *cobra.Command, args []string) error {
			_, opts.asciiF58 = os.LookupEnv("FLUX_F58_FORCE_ASCII")
			return jobID(args, cmd.InOrStdin(), cmd.OutOrStdout(), opts)
		}),
	}
	cmd.Flags().StringVarP(&opts.to, "to", "t", jobid.Dec,
		"Convert jobid to specified form: "+strings.Join(jobid.Encodings(), "|"))
	cmd.Flags().StringVar(&opts.from, "from", jobIDAny,
		"Input encoding, or \""+jobIDAny+"\" to detect each ID's encoding")
	return cmd
}

// jobID converts each of ids (or, if there are none, each line of stdin)
// and writes one line per ID to out. It stops at the first ID it cannot
// read, after writing the ones before it.
func jobID(ids []string, stdin io.Reader, out io.Writer, opts jobIDOptions) error {
	to := strings.ToLower(opts.to)
	if to == "" {
		to = jobid.Dec
	}
	if !slices.Contains(jobid.Encodings(), to) {
		return fmt.Errorf("%w %q (want one of %s)", jobid.ErrUnknownEncoding, opts.to, strings.Join(jobid.Encodings(), ", "))
	}
	from := strings.ToLower(opts.from)
	if from != "" && from != jobIDAny && !slices.Contains(jobid.Encodings(), from) {
		return fmt.Errorf("--from: %w %q (want %s or one of %s)", jobid.ErrUnknownEncoding, opts.from, jobIDAny, strings.Join(jobid.Encodings(), ", "))
	}
	if to == jobid.F58 && opts.asciiF58 {
		to = jobid.F58Plain
	}

	convert := func(s string) error {
		var (
			id  jobid.ID
			err error
		)
		if from == "" || from == jobIDAny {
			id, err = jobid.Parse(s)
		} else {
			id, err = jobid.ParseAs(s, from)
		}
		if err != nil {
			return err
		}
		enc, err := id.Encode(to)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, enc)
		return err
	}

	if len(ids) > 0 {
		for _, s := range ids {
			if err := convert(s); err != nil {
				return err
			}
		}
		return nil
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		if err := convert(sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if n == 0 {
		return errors.New("no job IDs on the command line or standard input")
	}
	return nil
}
