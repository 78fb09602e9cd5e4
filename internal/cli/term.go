package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Terminal questions and the --color option, answered once for every
// command.

// terminalFile returns w as a file open on a terminal, or nil.
func terminalFile(w any) *os.File {
	f, ok := w.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool { return terminalFile(w) != nil }

// terminalSize returns the width and height of the terminal w is, ok
// false when w is not a terminal (or says it is 0 wide).
func terminalSize(w any) (cols, rows int, ok bool) {
	f := terminalFile(w)
	if f == nil {
		return 0, 0, false
	}
	cols, rows, err := term.GetSize(int(f.Fd()))
	if err != nil || cols <= 0 {
		return 0, 0, false
	}
	return cols, rows, true
}

// addColorFlag registers --color[=WHEN] (and -L when short), whose
// value useColor reads: auto (the default), never, or always (the value
// when WHEN is left out).
func addColorFlag(f *pflag.FlagSet, p *string, short bool) {
	usage := "colorize output: `WHEN` is auto, never or always"
	if short {
		f.StringVarP(p, "color", "L", "auto", usage)
	} else {
		f.StringVar(p, "color", "auto", usage)
	}
	f.Lookup("color").NoOptDefVal = "always"
}

// useColor decides --color=WHEN for output w: auto colors a terminal
// unless NO_COLOR is set.
func useColor(when string, w io.Writer) (bool, error) {
	switch when {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto", "":
		return isTerminal(w) && os.Getenv("NO_COLOR") == "", nil
	}
	return false, fmt.Errorf("--color=%q: WHEN must be auto, never or always", when)
}

// Terminal colors (SGR escapes), one set for every command. The
// sequences are flux-core's where a command mirrors its output byte for
// byte (flux jobs and flux queue list use "01;3Nm" and reset with
// "0;0m", flux job eventlog "1m" then "3Nm").
const (
	sgrReset     = "\033[0m"
	sgrResetFlux = "\033[0;0m"
	sgrDim       = "\033[2m"
	sgrRed       = "\033[31m"
	sgrGreen     = "\033[32m"
	sgrYellow    = "\033[33m"
	sgrBlue      = "\033[34m"
	sgrMagenta   = "\033[35m"
	sgrWhite     = "\033[37m"
	sgrGray      = "\033[90m"
	sgrBoldRed   = "\033[01;31m"
	sgrBoldGreen = "\033[01;32m"
	sgrBoldBlue  = "\033[01;34m"
	sgrBold      = "\033[1m"
	sgrReverse   = "\033[7m"
)

// paint wraps s in code and a reset when on (and code is not empty).
func paint(on bool, code, s string) string {
	if !on || code == "" {
		return s
	}
	return code + s + sgrReset
}
