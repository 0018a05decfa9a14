package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newCheckpointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Take a sandbox's checkpoints, compare with them, roll back to them",
		Long: "A checkpoint records a sandbox's files in milliseconds while it runs on (under\n" +
			"gVisor, with --memory, its memory and processes too); hutch checkpoint diff\n" +
			"lists what changed since, and rollback brings the files back, restarting the\n" +
			"sandbox.",
	}
	groupCmd(cmd)
	var name string
	var memory bool
	create := &cobra.Command{
		Use:   "create ID [--name NAME] [--memory]",
		Short: "Take a checkpoint of a sandbox",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			cp, err := c.CreateCheckpoint(cmd.Context(), args[0], client.CheckpointRequest{Name: name, Memory: memory})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(cp)
			}
			_, err = fmt.Fprintln(a.stdout, cp.ID)
			return err
		},
	}
	create.Flags().StringVar(&name, "name", "", "a name for it")
	create.Flags().BoolVar(&memory, "memory", false, "keep its memory and processes too (gVisor)")
	ls := &cobra.Command{
		Use:   "ls ID",
		Short: "List a sandbox's checkpoints, oldest first",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			all, err := c.ListCheckpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(all)
			}
			t := newTable(a.stdout, "ID", "NAME", "AGE", "SIZE", "MEMORY", "NOTE")
			now := time.Now()
			for _, cp := range all {
				mem := "no"
				if cp.Memory {
					mem = "yes"
				}
				t.row(cp.ID, cp.Name, age(now, cp.CreatedAt), humanBytes(cp.SizeBytes), mem, cp.Note)
			}
			return t.flush()
		},
	}
	var path string
	diff := &cobra.Command{
		Use:   "diff ID CHECKPOINT [--path FILE]",
		Short: "List what changed in a sandbox's files since a checkpoint, or a file's unified diff",
		Args:  exactArgs(2, "a sandbox ID and a checkpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			d, err := c.DiffCheckpoint(cmd.Context(), args[0], args[1], path)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(d)
			}
			if path != "" {
				_, err := fmt.Fprint(a.stdout, d.Unified)
				return err
			}
			marks := map[string]string{"added": "A", "changed": "M", "removed": "D"}
			for _, ch := range d.Changes {
				suffix := ""
				if ch.Type == "dir" {
					suffix = "/"
				}
				if _, err := fmt.Fprintf(a.stdout, "%s %s%s\n", marks[ch.Kind], ch.Path, suffix); err != nil {
					return err
				}
			}
			if d.Truncated {
				_, err := fmt.Fprintln(a.stderr, "(more changed: the list stops at 10,000)")
				return err
			}
			return nil
		},
	}
	diff.Flags().StringVar(&path, "path", "", "print this file's unified diff instead")
	var withMemory bool
	rollback := &cobra.Command{
		Use:   "rollback ID CHECKPOINT [--memory]",
		Short: "Bring a sandbox's files back to a checkpoint (it restarts)",
		Args:  exactArgs(2, "a sandbox ID and a checkpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			sb, err := c.RollbackCheckpoint(cmd.Context(), args[0], args[1], client.RollbackRequest{Memory: withMemory})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(sb)
			}
			_, err = fmt.Fprintf(a.stdout, "%s: back to %s, %s\n", sb.ID, args[1], sb.State)
			return err
		},
	}
	rollback.Flags().BoolVar(&withMemory, "memory", false, "its memory and processes too (a checkpoint taken with --memory)")
	rm := &cobra.Command{
		Use:   "rm ID CHECKPOINT",
		Short: "Delete a checkpoint",
		Args:  exactArgs(2, "a sandbox ID and a checkpoint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return c.DeleteCheckpoint(cmd.Context(), args[0], args[1])
		},
	}
	cmd.AddCommand(create, ls, diff, rollback, rm)
	return cmd
}
