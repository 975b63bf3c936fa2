package main

// Reading the histories that clients record (apps/hashtable/op_history.h):
// one record per line,
//
//	client seq key kind input output call_ns return_ns
//
// kind: search, insert, update, delete or rmw. input: the value written,
// "-" for search, delete and rmw. output: "ok", "not-found", the value a
// search read or an rmw wrote, or
// "?" with return_ns "-" for an operation that has been invoked but has not
// returned. A client writes that record when it invokes the operation and a
// complete one (same client and seq) when it returns; an operation whose
// record is never completed has no response (its client died or gave up),
// and may have taken effect at any time after its invocation. Blank lines
// and lines starting with '#' are ignored.

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

const (
	outOK       = "ok"
	outNotFound = "not-found"
	outPending  = "?"
)

// kvInput is an operation's kind and the value it writes ("" if none).
type kvInput struct {
	kind  string
	value string
}

// kvOutput is what the operation returned; unknown when it never returned.
type kvOutput struct {
	unknown  bool
	notFound bool
	value    string // search: the value read
}

// record is one line of a history file.
type record struct {
	client  string
	seq     uint64
	key     string
	in      kvInput
	out     kvOutput
	call    int64
	ret     int64 // math.MaxInt64 when pending
	where   string
	pending bool
}

// opMeta labels an operation in the visualization.
type opMeta struct {
	client string
	seq    uint64
}

// parseRecord parses one line; where names it in errors.
func parseRecord(line, where string) (record, error) {
	f := strings.Fields(line)
	if len(f) != 8 {
		return record{}, fmt.Errorf("%s: expected \"client seq key kind input output call_ns return_ns\", got %q", where, line)
	}
	r := record{client: f[0], key: f[2], where: where}
	var err error
	if r.seq, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return record{}, fmt.Errorf("%s: seq %q is not a number", where, f[1])
	}
	r.in.kind = f[3]
	input, output := f[4], f[5]
	switch r.in.kind {
	case "insert", "update":
		if input == "-" {
			return record{}, fmt.Errorf("%s: %s needs a value", where, r.in.kind)
		}
		r.in.value = input
	case "search", "delete", "rmw":
		if input != "-" {
			return record{}, fmt.Errorf("%s: %s takes no value (\"-\"), got %q", where, r.in.kind, input)
		}
	default:
		return record{}, fmt.Errorf("%s: unknown kind %q (search, insert, update, delete, rmw)", where, r.in.kind)
	}
	switch {
	case output == outPending:
		r.out.unknown, r.pending = true, true
	case output == outNotFound && r.in.kind != "insert":
		r.out.notFound = true
	case output == outOK && r.in.kind != "search" && r.in.kind != "rmw":
	case (r.in.kind == "search" || r.in.kind == "rmw") && output != outOK:
		r.out.value = output
	default:
		return record{}, fmt.Errorf("%s: %s cannot return %q", where, r.in.kind, output)
	}
	if r.call, err = strconv.ParseInt(f[6], 10, 64); err != nil || r.call < 0 {
		return record{}, fmt.Errorf("%s: call time %q is not a number of nanoseconds", where, f[6])
	}
	if r.pending != (f[7] == "-") {
		return record{}, fmt.Errorf("%s: an operation has output \"?\" exactly when its return time is \"-\"", where)
	}
	if r.pending {
		r.ret = math.MaxInt64 // returns "at infinity": it may take effect any time after its call
	} else if r.ret, err = strconv.ParseInt(f[7], 10, 64); err != nil || r.ret < r.call {
		return record{}, fmt.Errorf("%s: return time %q is not a time after the call (%d)", where, f[7], r.call)
	}
	return r, nil
}

// history is every operation of the files, merged.
type history struct {
	byKey   map[string][]porcupine.Operation
	clients int
	ops     int
	pending int // operations with no response
}

// readHistories reads the files, pairs each invocation with its response,
// and numbers the clients (sorted by name) for the visualization.
func readHistories(paths []string) (*history, error) {
	type id struct {
		client string
		seq    uint64
	}
	records := map[id]record{}
	var order []id
	for _, path := range paths {
		file, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		scanner := bufio.NewScanner(file)
		scanner.Buffer(make([]byte, 64*1024), 16*1024*1024)
		number := 0
		for scanner.Scan() {
			number++
			line := strings.TrimSpace(scanner.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			r, err := parseRecord(line, fmt.Sprintf("%s:%d", path, number))
			if err != nil {
				file.Close()
				return nil, err
			}
			k := id{r.client, r.seq}
			prev, seen := records[k]
			switch {
			case !seen:
				order = append(order, k)
				records[k] = r
			case prev.pending && !r.pending && prev.key == r.key && prev.in == r.in && prev.call == r.call:
				records[k] = r // the response of an invoked operation
			default:
				file.Close()
				return nil, fmt.Errorf("%s: client %s's operation %d is already recorded at %s", r.where, r.client, r.seq, prev.where)
			}
		}
		err = scanner.Err()
		file.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	names := map[string]int{}
	for _, k := range order {
		names[k.client] = 0
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	for i, name := range sorted {
		names[name] = i
	}
	h := &history{byKey: map[string][]porcupine.Operation{}, clients: len(sorted)}
	for _, k := range order {
		r := records[k]
		h.byKey[r.key] = append(h.byKey[r.key], porcupine.Operation{
			ClientId: names[r.client], Input: r.in, Output: r.out, Call: r.call, Return: r.ret,
			Metadata: opMeta{r.client, r.seq},
		})
		h.ops++
		if r.pending {
			h.pending++
		}
	}
	return h, nil
}
