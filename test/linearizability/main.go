// linearizability: checks that the histories clients of the hash table
// recorded (apps/hashtable/op_history.h, one file per client process) are
// linearizable, with Porcupine and a model of the table's operations on one
// key (model.go), key by key.
//
//	linearizability [--timeout 60s] [--html FILE] HISTORY...
//
// Exit 0: linearizable. 1: a key's history is not (the message names the
// first such key, and --html writes Porcupine's visualization of that key's
// history). 3: no violation found, but the check of some key ran out of
// --timeout (unknown). 2: bad arguments or a malformed history.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	exitLinearizable    = 0
	exitNotLinearizable = 1
	exitUsage           = 2
	exitUnknown         = 3
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("linearizability", flag.ContinueOnError)
	flags.SetOutput(stderr)
	html := flags.String("html", "", "write Porcupine's visualization of the first non-linearizable key's history to this file")
	timeout := flags.Duration("timeout", time.Minute, "time limit of the check of one key (0: none); past it the result is unknown")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "usage: linearizability [--timeout 60s] [--html FILE] HISTORY...\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return exitUsage
	}
	if flags.NArg() == 0 || *timeout < 0 {
		flags.Usage()
		return exitUsage
	}
	h, err := readHistories(flags.Args())
	if err != nil {
		fmt.Fprintf(stderr, "linearizability: %v\n", err)
		return exitUsage
	}
	keys := make([]string, 0, len(h.byKey))
	for key := range h.byKey {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var unknown []string
	for _, key := range keys {
		ops := h.byKey[key]
		result, info := porcupine.CheckOperationsVerbose(keyModel, ops, *timeout)
		switch result {
		case porcupine.Illegal:
			fmt.Fprintf(stderr, "linearizability: NOT linearizable: key %s (%d operations on it; %d operations on %d keys by %d clients in all)\n",
				key, len(ops), h.ops, len(keys), h.clients)
			if *html != "" {
				if err := porcupine.VisualizePath(keyModel, info, *html); err != nil {
					fmt.Fprintf(stderr, "linearizability: writing %s: %v\n", *html, err)
				} else {
					fmt.Fprintf(stderr, "linearizability: the history of key %s is in %s\n", key, *html)
				}
			}
			return exitNotLinearizable
		case porcupine.Unknown:
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(stderr, "linearizability: UNKNOWN: the check of %d keys (first %s) ran out of --timeout %v; no violation found in the others\n",
			len(unknown), unknown[0], *timeout)
		return exitUnknown
	}
	fmt.Fprintf(stdout, "linearizability: linearizable: %d operations (%d without a response) on %d keys by %d clients\n",
		h.ops, h.pending, len(keys), h.clients)
	return exitLinearizable
}
