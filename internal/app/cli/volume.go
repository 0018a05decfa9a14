package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newVolumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"volumes"},
		Short:   "Make, list and remove named volumes that outlive sandboxes",
		Long: "A volume is a directory that outlives the sandboxes that mount it\n" +
			"(hutch create --volume NAME[:PATH[:ro|rw]]).",
	}
	groupCmd(cmd)
	create := &cobra.Command{
		Use:   "create NAME...",
		Short: "Make empty volumes",
		Args:  minArgs(1, "one or more volume names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, func(ctx context.Context, name string) error {
				_, err := c.CreateVolume(ctx, name)
				return err
			})
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List volumes and the sandboxes that mount them",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			vols, err := c.ListVolumes(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(vols)
			}
			now := time.Now()
			t := newTable(a.stdout, "NAME", "CREATED", "SANDBOXES")
			for _, v := range vols {
				users := strings.Join(v.Sandboxes, ",")
				if users == "" {
					users = "-"
				}
				t.row(v.Name, age(now, v.CreatedAt), users)
			}
			return t.flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove volumes and their files (not while a sandbox mounts them)",
		Args:  minArgs(1, "one or more volume names"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.forEach(cmd, args, c.DeleteVolume)
		},
	}
	cmd.AddCommand(create, ls, rm)
	return cmd
}

// parseVolume reads NAME[:PATH[:ro|rw|none]].
func parseVolume(cmd *cobra.Command, spec string) (client.VolumeMount, error) {
	parts := strings.Split(spec, ":")
	if len(parts) > 3 || parts[0] == "" {
		return client.VolumeMount{}, usageErrorf(cmd, "--volume takes NAME[:PATH[:ro|rw|none]], got %q", spec)
	}
	v := client.VolumeMount{Name: parts[0]}
	if len(parts) > 1 {
		v.Path = parts[1]
	}
	if len(parts) > 2 {
		v.Access = parts[2]
	}
	return v, nil
}
