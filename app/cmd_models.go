package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"talkbox/app/hub"
)

func init() {
	register(verb{name: "models", summary: "list installed models, their size and whether they are complete", run: runModels})
}

func runModels(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("models", stderr)
	dir := fs.String("dir", "", "model folder (default $"+hub.EnvModels+", else $XDG_DATA_HOME/talkbox/models)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("models takes no arguments")
	}
	store, err := openStore(*dir)
	if err != nil {
		return err
	}
	list, err := store.List()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "models in %s\n", store.Dir)
	installed := map[string]bool{}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "  none; get one with: talkbox pull")
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MODEL\tNAME\tTYPE\tSIZE\tSTATUS")
		for _, in := range list {
			installed[in.Repo] = true
			status := "ready"
			if !in.Complete {
				status = "incomplete: " + in.Problem
				if pct, ok := in.Percent(); ok && in.Partial > 0 {
					status = fmt.Sprintf("download %d%% done: %s", pct, in.Problem)
				}
			}
			size := hub.FormatBytes(in.Size)
			if in.Partial > 0 {
				size += " + " + hub.FormatBytes(in.Partial) + " partial"
			}
			kind := cmp.Or(strings.TrimSpace(in.SizeName+" "+hub.TypeLabel(in.Type)), "?")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.DisplayName(), cmp.Or(in.Alias, in.Repo, in.Name), kind, size, status)
		}
		tw.Flush()
	}
	var more []hub.KnownModel
	for _, k := range hub.Known {
		if !installed[k.Repo] {
			more = append(more, k)
		}
	}
	if len(more) > 0 {
		fmt.Fprintln(stdout, "\navailable with talkbox pull NAME:")
		for _, k := range more {
			fmt.Fprintf(stdout, "  %-18s %-28s %s\n", k.Alias, k.DisplayName(), k.About)
		}
	}
	return nil
}
