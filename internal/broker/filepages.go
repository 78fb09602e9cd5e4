package broker

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Most of an idle broker's resident memory is not its own: of 17 MB of
// RSS, 15 MB were the flux binary's text and read-only data, pages of the
// page cache that every flux process maps and shares (PSS was 2.3 MB).
// Which of them a process maps is whatever its start-up touched (package
// initialisation, every module's start) rounded up by the kernel's
// fault-around. releaseBinaryPages unmaps the binary's read-only pages
// from this process once it is quiet (the "auto" memory policy, after a
// trim): they stay in the page cache, and what runs again faults back in
// from there (a minor fault each 64 KiB), so the resident set is what the
// broker uses while idle. The writable data segment is not touched
// (MADV_DONTNEED would drop its written pages).

// Pages a burst of work faulted back in are released again when the
// broker goes quiet (its coarse clock stops: no module message for a
// tick), at most once every releaseGap, and only where the "auto"
// memory policy runs (TuneMemory: the flux broker command, not brokers
// inside tests).
const releaseGap = 10 * time.Second

var (
	releaseOnQuiet atomic.Bool  // set by TuneMemory's auto policy
	lastRelease    atomic.Int64 // Unix nanoseconds

	releaseLater atomic.Bool // a release is set for the end of the gap
)

// releaseWhenQuiet is the coarse clock's onQuiet: it releases the
// binary's pages now, or at the end of releaseGap when they were
// released less than that ago (one timer, not one per quiet moment).
func releaseWhenQuiet() {
	if !releaseOnQuiet.Load() {
		return
	}
	wait := time.Duration(lastRelease.Load() + int64(releaseGap) - time.Now().UnixNano())
	if wait <= 0 {
		releaseBinaryPages()
		return
	}
	if releaseLater.CompareAndSwap(false, true) {
		time.AfterFunc(wait, func() {
			releaseLater.Store(false)
			if releaseOnQuiet.Load() {
				releaseBinaryPages()
			}
		})
	}
}

// releaseBinaryPages drops this process's mappings of its executable's
// read-only pages and returns how many bytes of address space it
// advised.
func releaseBinaryPages() int {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	lastRelease.Store(time.Now().UnixNano())
	n := 0
	for _, r := range readOnlyMappings(maps, exe) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, r[0], r[1]-r[0], syscall.MADV_DONTNEED); e == 0 {
			n += int(r[1] - r[0])
		}
	}
	return n
}

// readOnlyMappings returns the [start, end) address ranges of the
// mappings of file path in a /proc/PID/maps text that are not writable.
func readOnlyMappings(maps []byte, path string) [][2]uintptr {
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// 00400000-00f95000 r-xp 00000000 fe:00 10274873   /path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)") != path {
			continue
		}
		perms := f[1]
		if len(perms) < 2 || perms[0] != 'r' || perms[1] == 'w' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
	}
	return out
}
