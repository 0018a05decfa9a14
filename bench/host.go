package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// hostInfo is what the numbers were measured on, as the results file
// records it with each line.
type hostInfo struct {
	CPU     string `json:"cpu"`
	Cores   int    `json:"cores"`
	Virtual bool   `json:"virtual,omitempty"` // the CPU says it runs under a hypervisor: its cores are vCPUs
	Memory  string `json:"memory"`
	OS      string `json:"os"`
	Kernel  string `json:"kernel"`
	Runc    string `json:"runc"`
	Runsc   string `json:"runsc,omitempty"`
	Go      string `json:"go,omitempty"`    // the bench's toolchain
	Hutch   string `json:"hutch,omitempty"` // the version the daemon reports
	// Note is what the bench cannot see of the machine, written by hand.
	Note string `json:"note,omitempty"`

	date    string // when the run began, for the printed header
	binPath string
}

func collectHostInfo(ctx context.Context, runcPath, runscPath, hutchVersion, hutchPath string) hostInfo {
	model, virtual := cpuModel()
	h := hostInfo{
		CPU:     model,
		Cores:   runtime.NumCPU(),
		Virtual: virtual,
		Memory:  memTotal(),
		OS:      osName(),
		Kernel:  readTrimmed("/proc/sys/kernel/osrelease"),
		Go:      runtime.Version(),
		Hutch:   hutchVersion,
		date:    time.Now().Format("2006-01-02 15:04:05 MST"),
		binPath: hutchPath,
	}
	h.Runc = toolVersion(ctx, runcPath, "runc version ")
	if runscPath != "" {
		h.Runsc = toolVersion(ctx, runscPath, "runsc version ")
	}
	return h
}

// describe is the machine in a few words, as the page names it:
// "2 vCPUs (AMD EPYC), 24 GiB, Debian 12, kernel 6.18, runc 1.1.5".
func (h hostInfo) describe() string {
	cores := "cores"
	if h.Virtual {
		cores = "vCPUs"
	}
	parts := []string{fmt.Sprintf("%d %s (%s)", h.Cores, cores, h.CPU), h.Memory, h.OS, "kernel " + h.Kernel, "runc " + h.Runc}
	if h.Runsc != "" {
		parts = append(parts, "runsc "+h.Runsc)
	}
	if h.Note != "" {
		parts = append(parts, h.Note)
	}
	return strings.Join(parts, ", ")
}

// toolVersion is the first line of `tool --version`, without prefix; or,
// when the tool was built without its version stamped (runsc built by `go
// install`, as make runsc does, says VERSION_MISSING), its Go module's.
func toolVersion(ctx context.Context, path, prefix string) string {
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	first, _, _ := strings.Cut(string(out), "\n")
	v := strings.TrimPrefix(strings.TrimSpace(first), prefix)
	if err != nil || v == "" || v == "VERSION_MISSING" {
		if info, err := buildinfo.ReadFile(path); err == nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
			return info.Main.Version
		}
		return "unknown"
	}
	return v
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// cpuModel is the first "model name" of /proc/cpuinfo, and whether its
// flags say it runs under a hypervisor.
func cpuModel() (model string, virtual bool) {
	model = "unknown"
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return model, false
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); {
		case !ok:
		case k == "model name" && !found:
			model, found = v, true
		case k == "flags" && !virtual:
			virtual = strings.Contains(" "+v+" ", " hypervisor ")
		}
	}
	return model, virtual
}

// memTotal is the host's memory in whole GiB.
func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return fmt.Sprintf("%d GiB", (kb+1<<19)>>20)
			}
		}
	}
	return "unknown"
}

// osName is the distribution and its version, "Debian 12", from
// /etc/os-release.
func osName() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "unknown"
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[k] = strings.Trim(v, `"'`)
		}
	}
	if name := strings.Fields(vals["NAME"]); len(name) > 0 && vals["VERSION_ID"] != "" {
		return name[0] + " " + vals["VERSION_ID"]
	}
	if vals["PRETTY_NAME"] != "" {
		return vals["PRETTY_NAME"]
	}
	return "unknown"
}

func printHeader(w *strings.Builder, h hostInfo) {
	fmt.Fprintf(w, "Hutch benchmark, %s\n", h.date)
	fmt.Fprintf(w, "  kernel  %s (%s)\n", h.Kernel, h.OS)
	fmt.Fprintf(w, "  cpu     %s × %d, %s\n", h.CPU, h.Cores, h.Memory)
	fmt.Fprintf(w, "  runc    %s\n", h.Runc)
	if h.Runsc != "" {
		fmt.Fprintf(w, "  runsc   %s\n", h.Runsc)
	}
	fmt.Fprintf(w, "  hutch   %s (%s), bench built with %s\n", h.Hutch, h.binPath, h.Go)
	fmt.Fprintln(w)
}
