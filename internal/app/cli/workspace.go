package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newWorkspaceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "workspace",
		Aliases: []string{"workspaces"},
		Short:   "List workspaces, show their usage and set their quotas",
		Long: "A workspace is a tenant: each API key acts in one (hutch key create NAME\n" +
			"--workspace W) and sees only its sandboxes, volumes, templates and secrets.\n" +
			"The daemon's own key sees all, and alone sets quotas.",
	}
	groupCmd(cmd)
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the workspaces and their quotas",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "SANDBOXES", "MEMORY", "CPUS", "DISK", "HOURS/DAY", "CREATED")
			for _, w := range list {
				q := w.Quota
				t.row(w.Name, bound(float64(q.Sandboxes), ""), bound(float64(q.MemoryMB), " MiB"), bound(q.CPUs, ""),
					bound(float64(q.DiskMB), " MiB"), bound(q.SandboxHours, ""), age(now, w.CreatedAt))
			}
			return t.flush()
		},
	}
	usage := &cobra.Command{
		Use:   "usage WORKSPACE",
		Short: "What a workspace's sandboxes use, beside its quota",
		Args:  exactArgs(1, "a workspace name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			u, err := c.WorkspaceUsage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printUsage(u)
		},
	}
	var q client.Quota
	quota := &cobra.Command{
		Use:   "quota WORKSPACE [--sandboxes N] [--memory-mb N] [--cpus N] [--disk-mb N] [--sandbox-hours N]",
		Short: "Set a workspace's quota (0 or left out: no bound)",
		Args:  exactArgs(1, "a workspace name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			u, err := c.SetQuota(cmd.Context(), args[0], q)
			if err != nil {
				return err
			}
			return a.printUsage(u)
		},
	}
	quota.Flags().IntVar(&q.Sandboxes, "sandboxes", 0, "running (or paused) sandboxes at most")
	quota.Flags().Int64Var(&q.MemoryMB, "memory-mb", 0, "the memory limits of its running sandboxes, summed, at most")
	quota.Flags().Float64Var(&q.CPUs, "cpus", 0, "the CPU limits of its running sandboxes, summed, at most")
	quota.Flags().Int64Var(&q.DiskMB, "disk-mb", 0, "the disk limits of all its sandboxes, summed, at most")
	quota.Flags().Float64Var(&q.SandboxHours, "sandbox-hours", 0, "hours its sandboxes run in one UTC day, at most")
	cmd.AddCommand(ls, usage, quota)
	return cmd
}

// bound is a quota's figure, or "-" for none.
func bound(v float64, unit string) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + unit
}

func (a *app) printUsage(u *client.WorkspaceUsage) error {
	if a.jsonOutput() {
		return a.printJSON(u)
	}
	q := u.Quota
	t := newTable(a.stdout, "WORKSPACE "+u.Workspace, "USED", "QUOTA")
	t.row("sandboxes", strconv.Itoa(u.Sandboxes), bound(float64(q.Sandboxes), ""))
	t.row("memory", fmt.Sprintf("%d MiB", u.MemoryMB), bound(float64(q.MemoryMB), " MiB"))
	t.row("cpus", strconv.FormatFloat(u.CPUs, 'f', -1, 64), bound(q.CPUs, ""))
	t.row("disk", fmt.Sprintf("%d MiB", u.DiskMB), bound(float64(q.DiskMB), " MiB"))
	t.row("sandbox-hours ("+u.Day+")", strconv.FormatFloat(u.SandboxHours, 'f', 2, 64), bound(q.SandboxHours, ""))
	return t.flush()
}

func (a *app) newAuditCmd() *cobra.Command {
	var f client.AuditFilter
	cmd := &cobra.Command{
		Use:   "audit [--workspace W] [--limit N] [--before ID]",
		Short: "Show the audit log, newest first: who did what to which object",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			list, err := c.ListAudit(cmd.Context(), f)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(list)
			}
			t := newTable(a.stdout, "ID", "TIME", "KEY", "WORKSPACE", "USER", "ACTION", "OBJECT", "STATUS")
			for _, e := range list {
				key := e.Key
				if key == "" {
					key = "(daemon)"
				}
				status := strconv.Itoa(e.Status)
				if e.Code != "" {
					status += " " + e.Code
				}
				t.row(strconv.FormatInt(e.ID, 10), e.Time.Local().Format(time.DateTime), key, e.Workspace, orDash(e.User), e.Action, orDash(e.Object), status)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&f.Workspace, "workspace", "", "only this workspace's (the daemon's own key)")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "how many entries")
	cmd.Flags().Int64Var(&f.Before, "before", 0, "entries older than this ID (the next page)")
	return cmd
}
