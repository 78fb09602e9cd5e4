package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

const mpiHello = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("hello from rank %d of %d sum=%d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
`

const mpiAbort = `#include <mpi.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1)
        MPI_Abort(MPI_COMM_WORLD, 42);
    sleep(300);
    MPI_Finalize();
    return 0;
}
`

// mpicc compiles an MPI program (Debian's mpich; scripts/deps.sh
// installs it) into dir.
func mpicc(t *testing.T, dir, name, src string) string {
	t.Helper()
	cc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skip("mpicc not found: install mpich and libmpich-dev (scripts/deps.sh does as root)")
	}
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command(cc, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	return bin
}

// TestMPIHello runs a real MPICH program on 4 ranks over 4 brokers,
// bootstrapped by the job shells' PMI-1 server: one rank per broker, and
// two per broker (shared memory between them).
func TestMPIHello(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	dir := t.TempDir()
	hello := mpicc(t, dir, "mpi_hello", mpiHello)
	inst := testinstance.Start(t, testinstance.Options{Size: 4})
	want := make([]string, 4)
	for i := range want {
		want[i] = fmt.Sprintf("hello from rank %d of 4 sum=6", i)
	}
	for _, args := range [][]string{{"-N4", "-n4"}, {"-n4"}} {
		t.Run(strings.Join(args, ""), func(t *testing.T) {
			out := inst.MustRun(t, append(append([]string{"run"}, args...), hello)...)
			got := strings.Split(strings.TrimSpace(out), "\n")
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("flux run %s:\n%s", strings.Join(args, " "), out)
			}
		})
	}
}

// TestMPIAbort: a rank calling MPI_Abort ends the whole job with an
// exception, including the ranks still running.
func TestMPIAbort(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	dir := t.TempDir()
	abort := mpicc(t, dir, "mpi_abort", mpiAbort)
	inst := testinstance.Start(t, testinstance.Options{Size: 2})
	r := inst.Run(t, "run", "-N2", "-n2", abort)
	if r.Code == 0 || !strings.Contains(r.Stderr, "MPI_Abort") {
		t.Fatalf("flux run: %+v", r)
	}
	id := strings.TrimSpace(inst.MustRun(t, "job", "last"))
	if got := inst.MustRun(t, "jobs", "-n", "-o", "{status} {exception.type}", id); got != "FAILED exec\n" {
		t.Fatalf("job %s: %q", id, got)
	}
}
