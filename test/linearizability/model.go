package main

// The sequential specification of a key-value store's operations on one
// key (SMART-HT, apps/hashtable/hash_table.h, and SMART-BT,
// apps/btree/btree.h): insert is an upsert, update, delete and rmw of an
// absent key return not-found and change nothing, search returns the value
// or not-found, and rmw (read-modify-write) replaces the value v with
// Bump(v) and returns the value it wrote. An operation without a response
// changes the state as it would have, whatever it returned.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Bump is what the checkers' read-modify-write does to a value: a value
// ending in "+N" (N a number) ends in "+N+1" instead, any other value gets
// "+1" appended. Values stay short however many rmws a key sees, and every
// rmw of a key leaves a value no earlier write of it left.
func Bump(v string) string {
	if i := strings.LastIndexByte(v, '+'); i >= 0 {
		if n, err := strconv.ParseUint(v[i+1:], 10, 64); err == nil && v[i+1:] == strconv.FormatUint(n, 10) {
			return v[:i+1] + strconv.FormatUint(n+1, 10)
		}
	}
	return v + "+1"
}

// kvState is one key's state: absent, or present with a value.
type kvState struct {
	present bool
	value   string
}

func step(state, input, output interface{}) (bool, interface{}) {
	s := state.(kvState)
	in := input.(kvInput)
	out := output.(kvOutput)
	switch in.kind {
	case "search":
		if out.unknown {
			return true, s
		}
		if out.notFound {
			return !s.present, s
		}
		return s.present && s.value == out.value, s
	case "insert":
		return !out.notFound, kvState{true, in.value}
	case "update":
		if !s.present {
			return out.unknown || out.notFound, s
		}
		return !out.notFound, kvState{true, in.value}
	case "delete":
		if !s.present {
			return out.unknown || out.notFound, s
		}
		return !out.notFound, kvState{}
	case "rmw":
		if !s.present {
			return out.unknown || out.notFound, s
		}
		next := Bump(s.value)
		return out.unknown || (!out.notFound && out.value == next), kvState{true, next}
	}
	return false, s
}

func describeOperation(input, output interface{}) string {
	in := input.(kvInput)
	out := output.(kvOutput)
	var result string
	switch {
	case out.unknown:
		result = "no response"
	case out.notFound:
		result = "not-found"
	case in.kind == "search" || in.kind == "rmw":
		result = fmt.Sprintf("%q", out.value)
	default:
		result = "ok"
	}
	if in.kind == "insert" || in.kind == "update" {
		return fmt.Sprintf("%s(%q) -> %s", in.kind, in.value, result)
	}
	return fmt.Sprintf("%s() -> %s", in.kind, result)
}

func describeState(state interface{}) string {
	s := state.(kvState)
	if !s.present {
		return "absent"
	}
	return fmt.Sprintf("%q", s.value)
}

func describeMetadata(info interface{}) string {
	if m, ok := info.(opMeta); ok {
		return fmt.Sprintf("client %s, operation %d", m.client, m.seq)
	}
	return ""
}

// keyModel checks the history of one key (the caller partitions by key, to
// name the key that is not linearizable).
var keyModel = porcupine.Model{
	Init:                      func() interface{} { return kvState{} },
	Step:                      step,
	DescribeOperation:         describeOperation,
	DescribeState:             describeState,
	DescribeOperationMetadata: describeMetadata,
}
