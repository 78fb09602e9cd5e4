package shell

// Device control on cgroup v2: an eBPF program of type
// BPF_PROG_TYPE_CGROUP_DEVICE attached to the job's cgroup
// (BPF_F_ALLOW_MULTI, so the programs of the cgroups above it, such as
// systemd's, still run: an access must pass them all). The program is
// a short list of comparisons, written here instruction by
// instruction: it refuses (returns 0) an access to one of the denied
// devices and allows (returns 1) any other. It stays attached until the
// cgroup is removed.

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpf instruction opcodes used by the device filter.
const (
	bpfLdxMemW  = 0x61 // dst = *(u32 *)(src + off)
	bpfAndK     = 0x57 // dst &= imm (64-bit)
	bpfJneK     = 0x55 // if dst != imm goto pc+off
	bpfMovK     = 0xb7 // dst = imm (64-bit)
	bpfExit     = 0x95
	devcgBlock  = 1 // BPF_DEVCG_DEV_BLOCK
	devcgChar   = 2 // BPF_DEVCG_DEV_CHAR
	bpfInsnSize = 8
)

// bpfInsn encodes one instruction.
func bpfInsn(code, dst, src uint8, off int16, imm int32) []byte {
	var b [bpfInsnSize]byte
	b[0] = code
	b[1] = dst | src<<4
	binary.LittleEndian.PutUint16(b[2:], uint16(off))
	binary.LittleEndian.PutUint32(b[4:], uint32(imm))
	return b[:]
}

// deviceFilter is the program refusing devs. Its context is struct
// bpf_cgroup_dev_ctx {u32 access_type (type in the low 16 bits);
// u32 major; u32 minor}.
func deviceFilter(devs []Device) []byte {
	var p []byte
	p = append(p, bpfInsn(bpfLdxMemW, 2, 1, 0, 0)...) // r2 = access_type
	p = append(p, bpfInsn(bpfAndK, 2, 0, 0, 0xffff)...)
	p = append(p, bpfInsn(bpfLdxMemW, 3, 1, 4, 0)...) // r3 = major
	p = append(p, bpfInsn(bpfLdxMemW, 4, 1, 8, 0)...) // r4 = minor
	for _, d := range devs {
		t := int32(devcgBlock)
		if d.Char {
			t = devcgChar
		}
		p = append(p, bpfInsn(bpfJneK, 2, 0, 4, t)...)
		p = append(p, bpfInsn(bpfJneK, 3, 0, 3, int32(d.Major))...)
		p = append(p, bpfInsn(bpfJneK, 4, 0, 2, int32(d.Minor))...)
		p = append(p, bpfInsn(bpfMovK, 0, 0, 0, 0)...)
		p = append(p, bpfInsn(bpfExit, 0, 0, 0, 0)...)
	}
	p = append(p, bpfInsn(bpfMovK, 0, 0, 0, 1)...)
	return append(p, bpfInsn(bpfExit, 0, 0, 0, 0)...)
}

// bpfProgLoadAttr is the start of union bpf_attr for BPF_PROG_LOAD.
type bpfProgLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       uint64
	license     uint64
	logLevel    uint32
	logSize     uint32
	logBuf      uint64
	kernVersion uint32
	progFlags   uint32
	progName    [16]byte
}

// bpfProgAttachAttr is union bpf_attr for BPF_PROG_ATTACH.
type bpfProgAttachAttr struct {
	targetFd    uint32
	attachBpfFd uint32
	attachType  uint32
	attachFlags uint32
}

// denyDevicesV2 loads the filter for devs and attaches it to the v2
// cgroup at path.
func denyDevicesV2(path string, devs []Device) error {
	prog := deviceFilter(devs)
	license := []byte("GPL\x00")
	logBuf := make([]byte, 4096)
	attr := bpfProgLoadAttr{
		progType: unix.BPF_PROG_TYPE_CGROUP_DEVICE,
		insnCnt:  uint32(len(prog) / bpfInsnSize),
		insns:    uint64(uintptr(unsafe.Pointer(&prog[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1,
		logSize:  uint32(len(logBuf)),
		logBuf:   uint64(uintptr(unsafe.Pointer(&logBuf[0]))),
	}
	copy(attr.progName[:], "fluxgo_devices")
	fd, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(prog)
	runtime.KeepAlive(license)
	runtime.KeepAlive(logBuf)
	if e != 0 {
		return fmt.Errorf("loading the device filter of cgroup %s: %w (%s)", path, e, cString(logBuf))
	}
	defer syscall.Close(int(fd))
	cg, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", path, err)
	}
	defer syscall.Close(cg)
	at := bpfProgAttachAttr{targetFd: uint32(cg), attachBpfFd: uint32(fd),
		attachType: unix.BPF_CGROUP_DEVICE, attachFlags: unix.BPF_F_ALLOW_MULTI}
	if _, _, e := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_ATTACH, uintptr(unsafe.Pointer(&at)), unsafe.Sizeof(at)); e != 0 {
		return fmt.Errorf("attaching the device filter to cgroup %s: %w", path, e)
	}
	return nil
}

// cString is a NUL-terminated buffer as a string.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
