package cli

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

func (a *app) newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "node",
		Aliases: []string{"nodes"},
		Short:   "List the daemons that run sandboxes (the cluster's nodes)",
		Long: "A cluster's nodes are its hutch serve --role node daemons, each writing a\n" +
			"heartbeat to the shared store; a single box is its one node. The daemon's\n" +
			"own key alone lists them.",
	}
	groupCmd(cmd)
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the nodes: role, address, last heartbeat, state, capacity and what each holds",
		Long: "List what GET /v1/nodes answers: each node's role, address, last heartbeat,\n" +
			"state (up, or lost when silent for longer than --node-timeout, with why),\n" +
			"the CPUs and memory its sandboxes' limits commit of its machine's, and its\n" +
			"sandboxes, templates and warm pools' ready sandboxes. -o json prints the\n" +
			"whole answer.",
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			nodes, err := c.ListNodes(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				if nodes == nil {
					nodes = []client.Node{}
				}
				return a.printJSON(nodes)
			}
			now := a.now()
			t := newTable(a.stdout, "NAME", "ROLE", "STATE", "URL", "HEARTBEAT", "CPUS", "MEMORY", "SANDBOXES", "TEMPLATES", "WARM", "VERSION")
			var lost []client.Node
			for _, n := range nodes {
				t.row(n.ID, n.Role, n.State, n.URL, age(now, n.HeartbeatAt),
					ofTotal(n.CommittedCPUs, n.CPUs, ""), ofTotal(float64(n.CommittedMemoryMB)/1024, float64(n.MemoryMB)/1024, " GiB"),
					strconv.Itoa(n.Sandboxes), strconv.Itoa(len(n.Templates)), warmPools(n.Warm), orDash(n.Version))
				if n.Reason != "" {
					lost = append(lost, n)
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			for _, n := range lost {
				_, _ = fmt.Fprintln(a.stdout, n.Reason) // "node node-2 lost: no heartbeat since …"
			}
			return nil
		},
	}
	cmd.AddCommand(ls)
	return cmd
}

// ofTotal is a share of a total, to a tenth: "1.5/8", with a unit.
func ofTotal(used, total float64, unit string) string {
	f := func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
	return f(used) + "/" + f(total) + unit
}

// warmPools is a node's warm pools' ready sandboxes, "base@runc=2", or
// "-" for none.
func warmPools(warm map[string]int) string {
	var out []string
	for _, pool := range slices.Sorted(maps.Keys(warm)) {
		out = append(out, pool+"="+strconv.Itoa(warm[pool]))
	}
	return orDash(strings.Join(out, ","))
}
