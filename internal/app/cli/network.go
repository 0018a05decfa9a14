package cli

import (
	"cmp"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hutchdev/hutch/client"
)

// networkFlags describe a network policy (create, run, network set).
type networkFlags struct {
	mode        string
	allow, deny []string
}

// register adds --network (named modeFlag when not ""), --allow and --deny.
func (f *networkFlags) register(cmd *cobra.Command, modeFlag string) {
	if modeFlag == "" {
		modeFlag = "network"
	}
	fl := cmd.Flags()
	fl.StringVar(&f.mode, modeFlag, "", "network mode: none (loopback only), allowlist (only --allow, minus --deny), full (the public internet, minus --deny) or learn (as full, keeping every destination for hutch network propose); default: the daemon's")
	fl.StringArrayVar(&f.allow, "allow", nil, "with --network allowlist, a destination `DEST` it may reach: a domain (pypi.org, *.github.com), optionally :PORT, or an address or CIDR; repeatable")
	fl.StringArrayVar(&f.deny, "deny", nil, "a destination `DEST` it may not reach, as --allow's; repeatable")
}

// policy is the policy the flags give, or nil when they give none.
func (f *networkFlags) policy(cmd *cobra.Command) (*client.NetworkPolicy, error) {
	if f.mode == "" {
		if len(f.allow) > 0 || len(f.deny) > 0 {
			return nil, usageErrorf(cmd, "--allow and --deny need --network (allowlist or full)")
		}
		return nil, nil
	}
	return &client.NetworkPolicy{Mode: f.mode, Allow: f.allow, Deny: f.deny}, nil
}

func (a *app) newNetworkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "network",
		Short: "Change a sandbox's network policy and see what it refused",
		Long: "A sandbox reaches the outside only through the daemon, under its policy:\n" +
			"none, allowlist, full, or learn (full, keeping every destination it reaches\n" +
			"for hutch network propose). The host, private and link-local addresses and\n" +
			"other sandboxes are refused whatever it says.",
	}
	groupCmd(cmd)
	var nf networkFlags
	set := &cobra.Command{
		Use:   "set ID --mode none|allowlist|full|learn [--allow DEST]... [--deny DEST]...",
		Short: "Replace a sandbox's network policy, for its next connections",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := nf.policy(cmd)
			if err != nil {
				return err
			}
			if p == nil {
				return usageErrorf(cmd, "give --mode")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			sb, err := c.SetNetwork(cmd.Context(), args[0], *p)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(sb.Network)
			}
			_, err = fmt.Fprintf(a.stdout, "%s: network %s\n", sb.ID, describePolicy(sb.Network))
			return err
		},
	}
	nf.register(set, "mode")
	var follow bool
	events := &cobra.Command{
		Use:   "events ID [-f]",
		Short: "List the connections and lookups a sandbox's policy refused, and why",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			print := func(ev client.NetworkEvent) error {
				if a.jsonOutput() {
					return a.printJSON(ev)
				}
				_, err := fmt.Fprintf(a.stdout, "%s  %-3s  %s: %s\n", ev.Time.Local().Format("15:04:05"), ev.Kind, ev.Dest, ev.Reason)
				return err
			}
			if follow {
				ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
				defer stop()
				return c.FollowNetworkEvents(ctx, args[0], 0, print)
			}
			evs, err := c.NetworkEvents(cmd.Context(), args[0], 0)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(evs)
			}
			for _, ev := range evs.Events {
				if err := print(ev); err != nil {
					return err
				}
			}
			return nil
		},
	}
	events.Flags().BoolVarP(&follow, "follow", "f", false, "follow: print refusals as they happen, until interrupted")
	logCmd := &cobra.Command{
		Use:   "log ID",
		Short: "List a sandbox's connections and lookups, each with the rule that let it through or refused it",
		Args:  exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			l, err := c.NetworkLog(cmd.Context(), args[0], 0)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(l)
			}
			t := newTable(a.stdout, "TIME", "KIND", "DESTINATION", "ADDRESS", "DECISION", "RULE", "OUT", "IN")
			for _, e := range l.Entries {
				decision := "allowed"
				if !e.Allowed {
					decision = "refused"
				}
				dest := e.Name
				if e.Port != 0 && e.Kind != "dns" {
					dest = fmt.Sprintf("%s:%d", cmp.Or(e.Name, e.Addr), e.Port)
				}
				t.row(e.Time.Local().Format("15:04:05"), cmp.Or(e.Protocol, e.Kind), dest, e.Addr, decision, e.Rule,
					strconv.FormatInt(e.BytesOut, 10), strconv.FormatInt(e.BytesIn, 10))
			}
			return t.flush()
		},
	}
	propose := &cobra.Command{
		Use:   "propose ID",
		Short: "Print the smallest allow-list that would have let a sandbox's connections through (run it in mode learn first)",
		Long: "Print the smallest allow-list that would have let a sandbox's connections through:\n" +
			"those it made in mode learn (hutch network set ID --mode learn, or create it so),\n" +
			"or, if it never was in it, those its log has. As flags for hutch create, or with\n" +
			"-o json, the policy to PATCH.",
		Args: exactArgs(1, "a sandbox ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			p, err := c.NetworkProposal(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return a.printJSON(p)
			}
			flags := []string{"--network", p.Mode}
			for _, d := range p.Allow {
				flags = append(flags, "--allow", d)
			}
			_, err = fmt.Fprintln(a.stdout, strings.Join(flags, " "))
			return err
		},
	}
	cmd.AddCommand(set, events, logCmd, propose)
	return cmd
}

// describePolicy says a policy in a line.
func describePolicy(p client.NetworkPolicy) string {
	s := p.Mode
	if len(p.Allow) > 0 {
		s += fmt.Sprintf(", allow %v", p.Allow)
	}
	if len(p.Deny) > 0 {
		s += fmt.Sprintf(", deny %v", p.Deny)
	}
	return s
}
