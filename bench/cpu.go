package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuUse is CPU time used so far: the machine's (every core, busy in
// any process or the kernel's own threads) and one process's.
type cpuUse struct{ machine, process time.Duration }

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// readCPU reads the machine's CPU time from /proc/stat and process pid's
// (its own threads', not its children's) from /proc/PID/stat.
func readCPU(pid int) (cpuUse, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuUse{}, err
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return cpuUse{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var u cpuUse
	// user nice system idle iowait irq softirq: all but idle and iowait;
	// steal (the hypervisor's) is no one's here.
	for _, i := range []int{1, 2, 3, 6, 7} {
		ticks, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return cpuUse{}, fmt.Errorf("/proc/stat: %w", err)
		}
		u.machine += time.Duration(ticks) * clockTick
	}
	pstat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return cpuUse{}, err
	}
	// Fields after the command's closing parenthesis: state is the
	// first (field 3), utime and stime fields 14 and 15.
	i := strings.LastIndexByte(string(pstat), ')')
	if i < 0 {
		return cpuUse{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	rest := strings.Fields(string(pstat[i+1:]))
	if len(rest) < 13 {
		return cpuUse{}, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	for _, f := range rest[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return cpuUse{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		u.process += time.Duration(ticks) * clockTick
	}
	return u, nil
}

// perEach is the CPU used between u and later, per each of n.
func (u cpuUse) perEach(later cpuUse, n int) cpuUse {
	return cpuUse{machine: (later.machine - u.machine) / time.Duration(n), process: (later.process - u.process) / time.Duration(n)}
}
