// Command flux is the single fluxgo binary: the command-line tool, the
// broker (flux broker) and the job shell (flux shell).
package main

import (
	"os"

	"github.com/fluxgo/fluxgo/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
